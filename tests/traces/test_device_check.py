"""A trace that names its device (Kineto ``deviceProperties``) uploaded for another device says so (qa14: the
ResNet-50 trace of a V100, stored for the A100, gave A100 runs and no warning)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.main import create_app
from api.settings import Settings
from perfmodel.device_names import model_numbers, similar_ids
from perfmodel.hardware import Hardware
from perfmodel.specs import library
from perfmodel.traces.device_check import accelerator_of, device_mismatch
from perfmodel.traces.records import KernelRecord

TOKEN = "test-token-device-check"
ALEXNET = (Path(__file__).resolve().parents[1] / "data" / "traces"
           / "critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz")  # "NVIDIA A100-PG509-200"


def _hw(hardware_id: str) -> Hardware:
    return library()[hardware_id]


@pytest.mark.parametrize(("name", "numbers"), [
    ("Tesla V100-DGXS-32GB", {"V100"}), ("NVIDIA A100-PG509-200", {"A100"}), ("NVIDIA A100-SXM4-80GB", {"A100"}),
    ("NVIDIA H100 80GB HBM3", {"H100"}), ("AMD Instinct MI250X / MI250", {"MI250X", "MI250"}),
    ("NVIDIA L40S", {"L40S"}), ("Tesla T4", {"T4"}), ("AMD Radeon Graphics", set())])
def test_model_numbers(name: str, numbers: set[str]) -> None:
    assert model_numbers(name) == numbers


def test_mismatch_only_across_models() -> None:
    assert device_mismatch(_hw("nvidia-a100-sxm4-80gb"), "Tesla V100-DGXS-32GB") is not None
    assert device_mismatch(_hw("nvidia-l40"), "NVIDIA L40S") is not None
    for same, name in (("nvidia-a100-pcie-80gb", "NVIDIA A100-SXM4-80GB"), ("nvidia-h100-nvl-94gb", "NVIDIA H100 NVL"),
                       ("amd-mi250x", "AMD Instinct MI250X / MI250"), ("amd-mi250x", "AMD Radeon Graphics"),
                       ("nvidia-t4", "Tesla T4"), ("nvidia-a100-sxm4-80gb", None)):
        assert device_mismatch(_hw(same), name) is None, (same, name)


def test_the_upload_warns_when_the_trace_names_another_device(tmp_path: Path) -> None:
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'p.sqlite3'}", data_dir=tmp_path, api_token=TOKEN)
    with TestClient(create_app(settings)) as client:
        def upload(hardware: str) -> list[str]:
            response = client.post("/api/v1/traces", data={"hardware": hardware},
                                   files={"file": (ALEXNET.name, ALEXNET.read_bytes(), "application/gzip")},
                                   headers={"Authorization": f"Bearer {TOKEN}"})
            assert response.status_code == 201
            warnings: list[str] = response.json()["warnings"]
            return warnings

        wrong = upload("nvidia-h100-sxm5-80gb")
        assert wrong and wrong[0].startswith("the trace was recorded on 'NVIDIA A100-PG509-200', but its runs are "
                                             "stored for nvidia-h100-sxm5-80gb")
        assert not any("recorded on" in w for w in upload("nvidia-a100-sxm4-80gb"))


def test_similar_ids() -> None:
    ids = list(library())
    assert similar_ids("amd-instinct-mi250x", ids) == ["amd-mi250x"]
    assert similar_ids("a100", ids) == ["nvidia-a100-pcie-80gb", "nvidia-a100-sxm4-40gb", "nvidia-a100-sxm4-80gb"]
    assert similar_ids("nvidia-h100-sxm-80gb", ids)[0] == "nvidia-h100-nvl-94gb"  # same model number, sorted
    assert similar_ids("nvidia-l40ss", ids) == ["nvidia-l40s", "nvidia-l40", "nvidia-l4"]  # no model number
    assert similar_ids("zzz", ids) == []


def test_unknown_hardware_suggests_ids(tmp_path: Path) -> None:
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'p.sqlite3'}", data_dir=tmp_path, api_token=TOKEN)
    with TestClient(create_app(settings)) as client:
        response = client.post("/api/v1/predict", json={"hardware": "amd-instinct-mi250x", "op": {
            "kind": "matmul", "m": 64, "n": 64, "k": 64, "dtype": "fp16"}})
        assert response.status_code == 404
        assert response.json()["detail"] == ("unknown hardware 'amd-instinct-mi250x': did you mean amd-mi250x? "
                                             "GET /api/v1/hardware lists them")


def test_a_duplicate_upload_says_its_tags_were_not_applied(tmp_path: Path) -> None:
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'p.sqlite3'}", data_dir=tmp_path, api_token=TOKEN)
    trace = ALEXNET.parent / "triton_example__triton_example.json.gz"
    with TestClient(create_app(settings)) as client:
        def upload(tags: str | None) -> tuple[int, list[str]]:
            response = client.post("/api/v1/traces", data={"hardware": "nvidia-a100-sxm4-80gb",
                                                            **({"tags": tags} if tags else {})},
                                   files={"file": (trace.name, trace.read_bytes(), "application/gzip")},
                                   headers={"Authorization": f"Bearer {TOKEN}"})
            warnings: list[str] = response.json()["warnings"]
            return response.status_code, warnings

        assert upload("commit=abc") == (201, [])
        assert upload("commit=abc") == (200, [])  # the same tags: nothing lost
        assert upload(None) == (200, [])
        status, warnings = upload("commit=def")
        assert status == 200 and warnings == [
            "this file is already trace 1 of this device (tags: commit=abc); the tags sent with this upload were not "
            "applied"]


def _records(*kinds: str | None) -> list[KernelRecord]:
    return [KernelRecord(f"k{i}", "kernel" if kind is None else "device", 1e-5, "pytorch_kineto", device_kind=kind)
            for i, kind in enumerate(kinds)]


def test_an_mtia_trace_without_a_device_name_warns_on_a_gpu() -> None:
    """Meta's MTIA trace has an empty ``deviceProperties``; its device events are all MTIA's (qa14: uploaded for
    the A100 it became 2,671 A100 runs without a word)."""
    mtia = _records("mtia", "mtia")
    assert accelerator_of(mtia) == "mtia"
    warning = device_mismatch(_hw("nvidia-a100-sxm4-80gb"), None, mtia)
    assert warning is not None and warning.startswith("the trace's device work is all MTIA events, but its runs "
                                                      "are stored for nvidia-a100-sxm4-80gb")
    assert accelerator_of(_records("mtia", None)) is None  # a mix: no verdict
    assert accelerator_of(_records("cupti range profiler")) is None  # a CUPTI range on a GPU
    assert device_mismatch(_hw("intel-gaudi2"), None, _records("hpu")) is None
    assert device_mismatch(_hw("nvidia-a100-sxm4-80gb"), None, _records(None, None)) is None
