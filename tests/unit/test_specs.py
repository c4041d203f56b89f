"""The hardware library: every bundled spec loads and cites its numbers; bad specs fail precisely."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

import perfmodel
from perfmodel.hardware import Hardware, Sourced
from perfmodel.specs import SpecError, load_spec_file, read_yaml, schema_text, specs_dir

REQUIRED_IDS = (
    "nvidia-p100-sxm2-16gb", "nvidia-v100-sxm2-32gb", "nvidia-t4", "nvidia-a100-sxm4-40gb",
    "nvidia-a100-sxm4-80gb", "nvidia-a100-pcie-80gb", "nvidia-a40", "nvidia-l4", "nvidia-l40s",
    "nvidia-h100-sxm5-80gb", "nvidia-h100-pcie-80gb", "nvidia-h100-nvl-94gb",
    "nvidia-h200-sxm-141gb", "nvidia-gh200-96gb", "nvidia-b200",
    "amd-mi25", "amd-mi100", "amd-mi210", "amd-mi250x", "amd-mi300x", "amd-mi325x",
    "google-tpu-v4", "google-tpu-v5e", "google-tpu-v5p",
    # the current parts issue 24 names (each number cited: test_every_number_is_cited_and_every_null_explained)
    "nvidia-b300", "nvidia-gb200", "amd-mi355x", "google-tpu-v6e", "nvidia-l40",
    "aws-trainium1", "aws-trainium2", "aws-inferentia2",
    "intel-gaudi2", "intel-gaudi3", "generic-npu",
)

SPEC_FILES = sorted(specs_dir().rglob("*.yaml"))
BASE_FILE = specs_dir() / "nvidia" / "a100-sxm4-80gb.yaml"


def _blocks(hw: Hardware) -> list[tuple[str, Sourced]]:
    """Every cited block of a device with a readable location."""
    out: list[tuple[str, Sourced]] = [("<device>", hw)]
    out += [(f"engines[{e.name}]", e) for e in hw.engines]
    out += [(f"levels[{lv.name}]", lv) for lv in hw.levels]
    if hw.interconnect is not None:
        out.append(("interconnect", hw.interconnect))
    if hw.dma is not None:
        out.append(("dma", hw.dma))
    return out


def _numeric_fields(block: Sourced) -> dict[str, Any]:
    skip = {"source", "sources", "unknown", "derived_from", "overrides", "per_unit"}
    return {
        name: getattr(block, name)
        for name in type(block).model_fields
        if name not in skip and isinstance(getattr(block, name), int | float | dict | tuple)
        and not isinstance(getattr(block, name), bool)
    }


# --- the bundled library ---------------------------------------------------------------------

@pytest.mark.parametrize("hardware_id", REQUIRED_IDS)
def test_required_device_is_bundled(hardware_id: str) -> None:
    assert hardware_id in perfmodel.list_hardware()
    assert perfmodel.load_hardware(hardware_id).id == hardware_id


def test_list_is_sorted_and_unique() -> None:
    ids = perfmodel.list_hardware()
    assert ids == sorted(set(ids))
    assert len(ids) == len(SPEC_FILES)


def test_unknown_id_is_a_key_error_with_suggestions() -> None:
    with pytest.raises(KeyError, match="unknown hardware 'nvidia-a100'"):
        perfmodel.load_hardware("nvidia-a100")


@pytest.mark.parametrize("path", SPEC_FILES, ids=lambda p: p.stem)
def test_every_file_loads(path: Path) -> None:
    hw = load_spec_file(path)
    assert hw.id in perfmodel.list_hardware()


@pytest.mark.parametrize("hardware_id", perfmodel.list_hardware())
def test_engines_and_levels_are_sane(hardware_id: str) -> None:
    hw = perfmodel.load_hardware(hardware_id)
    assert hw.engines
    for engine in hw.engines:
        assert engine.peak_flops_per_s, f"{engine.name} has no peak"
        for dtype, peak in engine.peak_flops_per_s.items():
            assert peak > 0, f"{engine.name} {dtype.value} peak is {peak}"
    assert hw.levels[0].kind == "dram"
    assert all(lv.kind != "dram" for lv in hw.levels[1:])


@pytest.mark.parametrize("hardware_id", perfmodel.list_hardware())
def test_every_number_is_cited_and_every_null_explained(hardware_id: str) -> None:
    hw = perfmodel.load_hardware(hardware_id)
    for where, block in _blocks(hw):
        assert block.source.strip(), f"{where}: empty source"
        for name, value in _numeric_fields(block).items():
            citation = block.citation(name)
            assert citation.strip() and len(citation.strip()) >= 3, f"{where}.{name}: no citation"
            assert name not in block.unknown, f"{where}.{name}={value} is also listed as unknown"
        for name, reason in block.unknown.items():
            assert getattr(block, name) is None, f"{where}.{name}: unknown but set"
            assert reason.strip(), f"{where}.{name}: empty reason"
        for name in block.sources:
            assert getattr(block, name) is not None, f"{where}.{name}: cited but null"


TPU_IDS = [h for h in perfmodel.list_hardware() if perfmodel.load_hardware(h).kind == "tpu"]


@pytest.mark.parametrize("hardware_id", TPU_IDS)
def test_tpu_mxu_peak_is_its_arrays_at_its_clock(hardware_id: str) -> None:
    """A TPU's bf16 peak is its MXUs' multiply-accumulates at its clock (count x rows x cols x 2 FLOP x clock):
    the check each spec's clock or MXU count cites (v6e's clock is derived from it), within 1 %."""
    hw = perfmodel.load_hardware(hardware_id)
    mxu = next(e for e in hw.engines if e.engine_class == "matrix")
    assert hw.clock_hz is not None and mxu.mma_shape is not None and mxu.count is not None
    rows, cols = mxu.mma_shape[0], mxu.mma_shape[1]
    peak = next(v for d, v in mxu.peak_flops_per_s.items() if d.value == "bf16")
    assert mxu.count * rows * cols * 2 * hw.clock_hz == pytest.approx(peak, rel=0.01)


GAUDI_WITH_CLOCK = [h for h in perfmodel.list_hardware() if h.startswith("intel-gaudi")
                    and perfmodel.load_hardware(h).clock_hz is not None]


@pytest.mark.parametrize("hardware_id", GAUDI_WITH_CLOCK)
def test_gaudi_mme_peak_is_its_arrays_at_its_clock(hardware_id: str) -> None:
    """A Gaudi's bf16 matrix peak is its MMEs' 256 x 256 MACs x 2 FLOP at its clock, within 1 %: Gaudi 3 at the
    1600 MHz MME clock the part reports is 1678 TFLOPS (not the launch 1835, which needs 1750 MHz)."""
    hw = perfmodel.load_hardware(hardware_id)
    mme = next(e for e in hw.engines if e.engine_class == "matrix")
    assert hw.clock_hz is not None and mme.mma_shape is not None and mme.count is not None
    peak = next(v for d, v in mme.peak_flops_per_s.items() if d.value == "bf16")
    assert mme.count * mme.mma_shape[0] * mme.mma_shape[1] * 2 * hw.clock_hz == pytest.approx(peak, rel=0.01)


# MACs per MME per clock relative to its 256 x 256 BF16 array, per dtype, from Intel's published per-dtype figures:
# Gaudi 2 FP8 865 = 2 x BF16 432; Gaudi 3 white paper (launch clock) FP8 = BF16 1835, FP16 = TF32 459 (1/4),
# FP32 229 (1/8). A dtype a spec lists without a rate here fails, so no MME peak goes in unchecked.
GAUDI_MME_RATE: dict[str, dict[str, float]] = {
    "intel-gaudi2": {"bf16": 1.0, "fp8_e4m3": 2.0, "fp8_e5m2": 2.0},
    "intel-gaudi3": {"bf16": 1.0, "fp8_e4m3": 1.0, "fp8_e5m2": 1.0, "fp16": 0.25, "tf32": 0.25, "fp32": 0.125},
}
# The TPC clock each part reports (stas00/ml-engineering 'Clock speed': Gaudi 2 TPC=1800, Gaudi 3 TPC=1600 MHz) and
# its lanes per dtype (TPC User Guide: 2048-bit SIMD, 128 16-bit or 64 FP32 lanes; FMA = 2 FLOP).
GAUDI_TPC_CLOCK_HZ = {"intel-gaudi2": 1.8e9, "intel-gaudi3": 1.6e9}
TPC_LANES = {"bf16": 128, "fp16": 128, "fp32": 64}


@pytest.mark.parametrize("hardware_id", GAUDI_WITH_CLOCK)
def test_every_gaudi_mme_peak_is_its_arrays_at_its_clock_times_the_dtype_rate(hardware_id: str) -> None:
    """Each MME peak, every dtype: MMEs x 256 x 256 MACs x 2 FLOP x clock x the dtype's published rate, within 1 %
    (Gaudi 3's FP16 at the shipping 1.6 GHz is 419 TFLOPS, not the launch 459)."""
    hw = perfmodel.load_hardware(hardware_id)
    mme = next(e for e in hw.engines if e.engine_class == "matrix")
    assert hw.clock_hz is not None and mme.mma_shape is not None and mme.count is not None
    rates = GAUDI_MME_RATE[hardware_id]
    assert {d.value for d in mme.peak_flops_per_s} == set(rates)
    array = mme.count * mme.mma_shape[0] * mme.mma_shape[1] * 2 * hw.clock_hz
    for dtype, peak in mme.peak_flops_per_s.items():
        assert array * rates[dtype.value] == pytest.approx(peak, rel=0.01), dtype.value


@pytest.mark.parametrize("hardware_id", sorted(GAUDI_TPC_CLOCK_HZ))
def test_gaudi_tpc_peaks_are_its_lanes_at_its_tpc_clock(hardware_id: str) -> None:
    """TPC vector peaks: TPCs x lanes x 2 FLOP x the reported TPC clock, within 1 % (Gaudi 3 at 1.6 GHz: 26.2
    TFLOPS BF16, not the launch 28.7; Gaudi 2 at 1.8 GHz: Intel's 11)."""
    hw = perfmodel.load_hardware(hardware_id)
    tpc = next(e for e in hw.engines if e.engine_class == "vector")
    assert tpc.count == hw.units and set(d.value for d in tpc.peak_flops_per_s) <= set(TPC_LANES)
    for dtype, peak in tpc.peak_flops_per_s.items():
        expected = hw.units * TPC_LANES[dtype.value] * 2 * GAUDI_TPC_CLOCK_HZ[hardware_id]
        assert expected == pytest.approx(peak, rel=0.01), dtype.value


@pytest.mark.parametrize("hardware_id", [
    pytest.param("intel-gaudi2", marks=pytest.mark.xfail(strict=True, reason=(
        "Intel publishes no Gaudi 2 FP16 MME rate (its MME supports FP16), so fp16 GEMMs fall back to the TPCs"))),
    "intel-gaudi3",
])
def test_an_fp16_gemm_on_a_gaudi_runs_on_the_mme(hardware_id: str) -> None:
    """An fp16 GEMM takes the MME path, and a large one comes out near the MME's fp16 peak, far above any TPC's."""
    from perfmodel.dtypes import DType
    from perfmodel.machine import tables
    from perfmodel.ops.base import DTYPE_INDEX
    from perfmodel.roofline import predict

    hw = perfmodel.load_hardware(hardware_id)
    path = tables(hw).matrix_paths[DTYPE_INDEX[DType.FP16]]
    assert path.engine == "mme" and path.dtype == DType.FP16
    n = 8192
    achieved = 2 * n**3 / predict(hardware_id, {"kind": "matmul", "m": n, "n": n, "k": n, "dtype": "fp16"}).time_s
    tpc_peak = max(e.peak_flops_per_s.get(DType.FP16, 0.0) for e in hw.engines_of("vector"))
    assert 0.5 * path.peak_flops_per_s < achieved <= path.peak_flops_per_s and achieved > 4 * tpc_peak


def _null_keys_without_reason(node: Any, where: str) -> list[str]:
    """Every key written as null in the YAML must have a reason in the same block's `unknown`."""
    missing: list[str] = []
    if isinstance(node, dict):
        unknown = node.get("unknown") or {}
        for key, value in node.items():
            if value is None and key not in unknown:
                missing.append(f"{where}.{key}")
            if key not in ("sources", "unknown", "peak_flops_per_s"):
                missing += _null_keys_without_reason(value, f"{where}.{key}")
    elif isinstance(node, list):
        for index, item in enumerate(node):
            missing += _null_keys_without_reason(item, f"{where}[{index}]")
    return missing


@pytest.mark.parametrize("path", SPEC_FILES, ids=lambda p: p.stem)
def test_yaml_nulls_have_reasons(path: Path) -> None:
    data = read_yaml(path.read_text())
    assert _null_keys_without_reason(data, path.stem) == []


# --- bad specs fail with file, field and reason ------------------------------------------------

def _base() -> dict[str, Any]:
    data = read_yaml(BASE_FILE.read_text())
    assert isinstance(data, dict)
    return data


def _load_mutated(tmp_path: Path, data: dict[str, Any]) -> SpecError:
    path = tmp_path / BASE_FILE.name
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(SpecError) as info:
        load_spec_file(path)
    err = info.value
    assert err.path == str(path)
    assert err.field and err.reason
    assert str(path) in str(err) and err.reason in str(err)
    return err


def test_base_spec_round_trips_through_yaml(tmp_path: Path) -> None:
    path = tmp_path / BASE_FILE.name
    path.write_text(yaml.safe_dump(_base()))
    assert load_spec_file(path) == load_spec_file(BASE_FILE)


def test_unknown_top_level_field(tmp_path: Path) -> None:
    data = _base()
    data["hbm_magic"] = 3
    err = _load_mutated(tmp_path, data)
    assert err.field == "hbm_magic"
    assert "extra" in err.reason.lower() or "not permitted" in err.reason


def test_unknown_level_field(tmp_path: Path) -> None:
    data = _base()
    data["levels"][1]["bogus_bytes"] = 1
    err = _load_mutated(tmp_path, data)
    assert err.field == "levels.1.bogus_bytes"


def test_negative_bandwidth(tmp_path: Path) -> None:
    data = _base()
    data["levels"][0]["bandwidth_bytes_per_s"] = -2.0e12
    err = _load_mutated(tmp_path, data)
    assert err.field == "levels.0.bandwidth_bytes_per_s"
    assert "greater than 0" in err.reason


def test_zero_peak(tmp_path: Path) -> None:
    data = _base()
    data["engines"][0]["peak_flops_per_s"]["fp16"] = 0
    err = _load_mutated(tmp_path, data)
    assert err.field.startswith("engines.0.peak_flops_per_s")
    assert "fp16" in err.reason


@pytest.mark.parametrize(
    "order",
    [
        pytest.param((3, 0, 1, 2), id="registers-before-dram"),
        pytest.param((1, 0, 2, 3), id="cache-before-dram"),
        pytest.param((0, 2, 1, 3), id="smem-before-l2"),
    ],
)
def test_levels_out_of_order(tmp_path: Path, order: tuple[int, ...]) -> None:
    data = _base()
    data["levels"] = [data["levels"][i] for i in order]
    err = _load_mutated(tmp_path, data)
    assert "outermost first" in err.reason
    assert err.field.startswith("levels"), f"field {err.field!r} does not name the levels"


def test_unknown_dtype_in_peaks(tmp_path: Path) -> None:
    data = _base()
    data["engines"][0]["peak_flops_per_s"]["fp7"] = 1e12
    err = _load_mutated(tmp_path, data)
    assert err.field.startswith("engines.0.peak_flops_per_s")
    assert "fp7" in err.field + err.reason


def test_null_latency_without_reason(tmp_path: Path) -> None:
    data = _base()
    i = next(i for i, level in enumerate(data["levels"]) if level["latency_s"] is None)  # DRAM has a figure now
    del data["levels"][i]["unknown"]["latency_s"]
    err = _load_mutated(tmp_path, data)
    assert err.field.startswith(f"levels.{i}")
    assert "latency_s" in err.field + err.reason


def test_id_not_matching_file_name(tmp_path: Path) -> None:
    data = _base()
    data["id"] = "nvidia-something-else"
    err = _load_mutated(tmp_path, data)
    assert err.field == "id"


def test_not_a_mapping(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("- 1\n- 2\n")
    with pytest.raises(SpecError) as info:
        load_spec_file(path)
    assert info.value.path == str(path)


# --- JSON Schema --------------------------------------------------------------------------------

SCHEMA_FILE = specs_dir() / "schema.json"


def test_schema_file_is_fresh() -> None:
    assert SCHEMA_FILE.exists(), "run `perfmodel hardware schema > hardware_specs/schema.json`"
    assert SCHEMA_FILE.read_text() == schema_text(), (
        "hardware_specs/schema.json is stale: run `perfmodel hardware schema > hardware_specs/schema.json`"
    )


def test_schema_is_valid_json_schema() -> None:
    schema = json.loads(schema_text())
    jsonschema.Draft202012Validator.check_schema(schema)


@pytest.mark.parametrize("path", SPEC_FILES, ids=lambda p: p.stem)
def test_yaml_validates_against_schema(path: Path) -> None:
    """Each file, read as the library reads it (YAML 1.2 floats), is valid under schema.json."""
    validator = jsonschema.Draft202012Validator(json.loads(schema_text()))
    errors = [f"{'.'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
              for e in validator.iter_errors(read_yaml(path.read_text()))]
    assert errors == []


def test_schema_rejects_a_bad_spec() -> None:
    validator = jsonschema.Draft202012Validator(json.loads(schema_text()))
    data = json.loads(json.dumps(perfmodel.load_hardware("nvidia-a100-sxm4-80gb").model_dump(mode="json")))
    assert list(validator.iter_errors(data)) == []
    bad = copy.deepcopy(data)
    bad["levels"][0]["bandwidth_bytes_per_s"] = -1
    assert list(validator.iter_errors(bad))
    bad = copy.deepcopy(data)
    bad["bogus"] = 1
    assert list(validator.iter_errors(bad))


# --- what-if variants -----------------------------------------------------------------------------

OVERRIDES = {"levels.dram.bandwidth_bytes_per_s": "x1.5", "levels.SMEM.capacity_bytes": "x2",
             "clock_hz": "x1.1"}


@pytest.fixture(scope="module")
def a100() -> Hardware:
    return perfmodel.load_hardware("nvidia-a100-sxm4-80gb")


@pytest.fixture(scope="module")
def fast(a100: Hardware) -> Hardware:
    return perfmodel.derive_variant("nvidia-a100-sxm4-80gb", "a100-fast", OVERRIDES)


def test_variant_scales_the_named_numbers(a100: Hardware, fast: Hardware) -> None:
    assert fast.id == "a100-fast"
    assert fast.dram.bandwidth_bytes_per_s == pytest.approx(a100.dram.bandwidth_bytes_per_s * 1.5)
    assert fast.dram.capacity_bytes == a100.dram.capacity_bytes
    assert fast.level("SMEM").capacity_bytes == pytest.approx(a100.level("SMEM").capacity_bytes * 2)
    assert fast.level("L2").capacity_bytes == a100.level("L2").capacity_bytes
    assert fast.units == a100.units


def test_clock_scaling_scales_peaks_and_on_chip_bandwidth_not_dram(a100: Hardware, fast: Hardware) -> None:
    assert fast.clock_hz == pytest.approx(a100.clock_hz * 1.1)
    for base, new in zip(a100.engines, fast.engines, strict=True):
        assert set(new.peak_flops_per_s) == set(base.peak_flops_per_s)
        for dtype, peak in base.peak_flops_per_s.items():
            assert new.peak_flops_per_s[dtype] == pytest.approx(peak * 1.1)
    for base, new in zip(a100.levels[1:], fast.levels[1:], strict=True):
        if base.bandwidth_bytes_per_s is None:
            assert new.bandwidth_bytes_per_s is None
        else:
            assert new.bandwidth_bytes_per_s == pytest.approx(base.bandwidth_bytes_per_s * 1.1)
    # DRAM: only the explicit x1.5, not the clock.
    assert fast.dram.bandwidth_bytes_per_s == pytest.approx(a100.dram.bandwidth_bytes_per_s * 1.5)
    assert fast.interconnect == a100.interconnect


def test_clock_only_variant_leaves_dram_alone(a100: Hardware) -> None:
    v = perfmodel.derive_variant(a100, "a100-oc", {"clock_hz": "*2"})
    assert v.dram == a100.dram
    assert v.peak_flops_per_s(perfmodel.DType.BF16) == pytest.approx(2 * a100.peak_flops_per_s(perfmodel.DType.BF16))


def test_variant_records_provenance(a100: Hardware, fast: Hardware) -> None:
    assert fast.derived_from == "nvidia-a100-sxm4-80gb"
    assert fast.overrides == OVERRIDES
    assert fast.content_hash != a100.content_hash
    assert "levels.dram.bandwidth_bytes_per_s" in fast.dram.citation("bandwidth_bytes_per_s")
    assert a100.derived_from is None and a100.overrides is None


def test_variant_is_deterministic(fast: Hardware) -> None:
    again = perfmodel.derive_variant("nvidia-a100-sxm4-80gb", "a100-fast", dict(OVERRIDES))
    assert again.content_hash == fast.content_hash


def test_variant_set_value_and_explain(a100: Hardware) -> None:
    v = perfmodel.derive_variant(a100, "a100-lat", {"levels.dram.latency_s": 5e-7, "units": 100})
    assert v.dram.latency_s == 5e-7
    assert "latency_s" not in v.dram.unknown
    assert v.units == 100


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("levels.nope.capacity_bytes", 2),
        ("levels.dram.foo.bar", 1),
        ("levels.dram.nope", "x2"),
        ("levels.dram.nope", 5),
        ("engines.nope.peak_flops_per_s", "x2"),
        ("engines.tensor.nope", 5),
        ("interconnect.nope", 5),
        ("clock_hz", "fast"),
        ("bogus", 1),
    ],
)
def test_bad_override_names_the_key(a100: Hardware, key: str, value: Any) -> None:
    with pytest.raises(SpecError) as info:
        perfmodel.derive_variant(a100, "bad", {key: value})
    assert info.value.field == key, f"error names {info.value.field!r}, not the override key {key!r}"
    assert info.value.reason
