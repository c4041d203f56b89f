"""Charts legible at 1400 px (issue 25): roof labels placed apart and off the diagonals, human column names,
axes with more than one tick, titles short enough for a half-width chart."""

from __future__ import annotations

from typing import Any

import pytest

from perfmodel.specs import library, load_hardware
from web.plotting import LABEL_GAP_DECADES, label_sides, roofline_figure, si_ticks
from web.templating import column_name


def test_close_roof_labels_take_the_other_side_or_move_left() -> None:
    assert label_sides([1e15, 1e14]) == [(True, 0), (True, 0)]  # a decade apart: both above
    assert label_sides([1e15, 0.9e15]) == [(True, 0), (False, 0)]  # close: the second below its line
    sides = label_sides([1e15, 0.95e15, 0.9e15])
    assert sides[2] not in sides[:2]  # a third in the same band neither above nor below at the edge


@pytest.mark.parametrize("hardware_id", sorted(library()))
def test_no_two_compute_labels_share_a_place(hardware_id: str) -> None:
    fig = roofline_figure([load_hardware(hardware_id)], None, "t")
    compute = [a for a in fig.layout.annotations if a.xanchor == "right"]
    memory = [a for a in fig.layout.annotations if a.xanchor == "left"]
    assert compute and memory and all(a.textangle for a in memory)  # memory labels slanted above the top roof
    top = max(a.y for a in compute)
    assert all(a.y == pytest.approx(top) for a in memory)  # ... where no line runs, not on their diagonals
    def band(a: Any) -> tuple[float, float]:  # the label's height in log10 FLOP/s, above or below its roof
        return (a.y, a.y + LABEL_GAP_DECADES) if a.yanchor == "bottom" else (a.y - LABEL_GAP_DECADES, a.y)

    for i, a in enumerate(compute):
        for b in compute[:i]:
            (lo, hi), (lo_b, hi_b) = band(a), band(b)
            assert a.xshift != b.xshift or hi <= lo_b + 1e-9 or hi_b <= lo + 1e-9, (a.text, b.text)
    top_label = next(a for a in compute if a.y == pytest.approx(top) and a.xshift == 0)
    assert top_label.yanchor == "top"  # below the top roof: above it stand the memory labels
    assert fig.layout.yaxis.range[1] > top  # headroom for the slanted labels


def test_dense_ticks_give_a_narrow_time_axis_several_labels() -> None:
    ticks = si_ticks(unit="s", mantissas=(1.0, 2.0, 5.0))
    within = [t for v, t in zip(ticks["tickvals"], ticks["ticktext"], strict=True) if 1.7e-4 <= v <= 1.1e-3]
    assert within == ["200 µs", "500 µs", "1 ms"]


def test_column_names_are_words() -> None:
    assert [column_name(k) for k in ("tile_m", "time_s", "footprint_bytes", "split_k", "raster_group")] == [
        "Tile M", "Predicted time", "On-chip footprint", "Split-K", "Raster group"]
    assert "_" not in column_name("rows_per_block")


def test_roof_labels_keep_apart_when_the_points_stretch_the_axis() -> None:
    """A100 fp16 tensor (312 T) and fp16 cuda-core (78 T) roofs are 0.6 decades apart: at the device page's scale
    their labels fit between them, but a trace whose kernels reach down to 100 kFLOP/s squeezes the axis to ~40 px
    a decade, and the two labels met (the roofline-counters screenshot)."""
    from web.plotting import LABEL_PX, PLOT_MARGIN_PX, label_gap_decades

    assert label_gap_decades(5.0, 560) == LABEL_GAP_DECADES  # a plain roofline keeps the least gap
    fig = roofline_figure([load_hardware("nvidia-a100-sxm4-80gb")], ["fp16", "fp32"], "t", per_engine=True,
                          y_min=1e5)
    compute = [a for a in fig.layout.annotations if a.xanchor == "right"]
    px_per_decade = (560 - PLOT_MARGIN_PX) / (fig.layout.yaxis.range[1] - 5.0)
    for i, a in enumerate(compute):
        for b in compute[:i]:
            if a.xshift != b.xshift:
                continue
            # each label's pixel band: LABEL_PX above (yanchor bottom) or below (top) its roof
            lo_a = a.y * px_per_decade - (LABEL_PX if a.yanchor == "top" else 0)
            lo_b = b.y * px_per_decade - (LABEL_PX if b.yanchor == "top" else 0)
            assert abs(lo_a - lo_b) >= LABEL_PX - 1e-6, (a.text, b.text)
