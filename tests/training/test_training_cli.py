"""``perfmodel train-layouts``: a ranked search, one layout's check with its fixes, clear errors."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from perfmodel.cli import app

RUNNER = CliRunner()
BASE = ["train-layouts", "llama-3-8b", "-H", "nvidia-h100-sxm5-80gb", "--seq-len", "4096"]


def test_the_search_lists_fitting_layouts_fastest_first() -> None:
    out = RUNNER.invoke(app, [*BASE, "--devices", "16", "--global-batch", "64", "--top", "4", "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    steps = [row["step_s"] for row in data["fastest"]]
    assert len(steps) == 4 and steps == sorted(steps)
    assert data["layouts_costed"] > data["fit"] > 0
    assert all(row["memory_bytes"]["total"] <= row["memory_bytes"]["capacity"] for row in data["fastest"])


def test_one_layout_that_does_not_fit_lists_the_changes() -> None:
    out = RUNNER.invoke(app, [*BASE, "--devices", "8", "--global-batch", "64", "--tp", "1", "--pp", "1", "--dp", "8",
                              "--zero", "1", "--micro-batch", "8"])
    assert out.exit_code == 0, out.output
    assert "does not fit: needs" in out.output and "fits with" in out.output


def test_a_layout_of_other_devices_is_refused() -> None:
    out = RUNNER.invoke(app, [*BASE, "--devices", "8", "--tp", "3", "--pp", "1", "--dp", "2"])
    assert out.exit_code == 2 and "not --devices 8" in out.output


def test_workload_flags_change_the_memory() -> None:
    one = ["--devices", "8", "--global-batch", "8", "--tp", "8", "--pp", "1", "--dp", "1", "--json"]
    plain = json.loads(RUNNER.invoke(app, [*BASE, *one]).output)["layout"]["memory_bytes"]
    gpt = json.loads(RUNNER.invoke(app, [*BASE, *one, "--dropout", "--no-flash", "--no-sequence-parallel",
                                         "--fp32-grads"]).output)["layout"]["memory_bytes"]
    assert gpt["activations"] > 2 * plain["activations"] and gpt["gradients"] == 2 * plain["gradients"]


def test_the_device_speed_spread_flag_changes_the_step() -> None:
    one = ["--devices", "8", "--global-batch", "8", "--tp", "8", "--pp", "1", "--dp", "1", "--json"]
    off, default = (json.loads(RUNNER.invoke(app, [*BASE, *one, *extra]).output)["layout"]["step_s"]
                    for extra in (["--device-speed-spread", "0"], []))
    assert off < default
    bad = RUNNER.invoke(app, [*BASE, *one, "--device-speed-spread", "1.5"])
    assert bad.exit_code != 0 and "device_speed_spread" in bad.output


def test_fsdp_accumulation_and_pod_flags_lengthen_the_step() -> None:
    """--separate-grad-accumulation: a DRAM stream per micro-batch (m = 4 here); --pod-devices with a taper: the
    dp reduction of 4 ranks across 2-device pods crosses the tapered uplinks."""
    one = ["--devices", "8", "--global-batch", "16", "--tp", "2", "--pp", "1", "--dp", "4", "--zero", "1", "--json"]
    base, separate, pods = (json.loads(RUNNER.invoke(app, [*BASE, *one, *extra]).output)["layout"]
                            for extra in ([], ["--separate-grad-accumulation"],
                                          ["--pod-devices", "2", "--pod-oversubscription", "7"]))
    assert base["time_s"]["grad_accumulate_s"] == 0.0 < separate["time_s"]["grad_accumulate_s"]
    assert separate["step_s"] > base["step_s"]
    dp = {k: v["time_s"]["dp_exposed_s"] + v["time_s"]["dp_hidden_s"] for k, v in (("base", base), ("pods", pods))}
    assert dp["pods"] > dp["base"]
    bad = RUNNER.invoke(app, [*BASE, *one, "--pod-devices", "2", "--pod-oversubscription", "0.5"])
    assert bad.exit_code != 0 and "pod_oversubscription" in bad.output


def test_the_attention_kernel_flag_changes_the_step() -> None:
    """--attention-kernel fa2 on an H100: FlashAttention-2's mma.sync kernel, a longer step; unknown: refused."""
    one = ["--devices", "8", "--global-batch", "8", "--tp", "8", "--pp", "1", "--dp", "1", "--json"]
    native, fa2 = (json.loads(RUNNER.invoke(app, [*BASE, *one, *extra]).output)["layout"]["step_s"]
                   for extra in ([], ["--attention-kernel", "fa2"]))
    assert native < fa2
    bad = RUNNER.invoke(app, [*BASE, *one, "--attention-kernel", "fa4"])
    assert bad.exit_code != 0 and "attention_kernel" in bad.output
