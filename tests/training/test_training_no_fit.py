"""When no layout fits: the reason and the smallest request changes that fit (``perfmodel.training.no_fit``), through
the library, the CLI, ``POST /api/v1/training/layouts`` and the training page (issue 29, qa17)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from api.main import create_app
from api.settings import Settings
from perfmodel.cli import app
from perfmodel.graph.llm_config import bundled
from perfmodel.roofline import resolve_hardware
from perfmodel.training.layout import TrainingSetup
from perfmodel.training.no_fit import _nearest, does_not_fit
from perfmodel.training.search import search_layouts

H100 = "nvidia-h100-sxm5-80gb"


def test_nearest_multiples_come_nearest_first() -> None:
    assert _nearest(16383, [8, 16], False)[:2] == [16384, 16376]
    assert _nearest(8, [8, 16, 32], True) == [16, 32]  # up only: the count itself is not a change


def test_a_model_too_big_for_its_devices_says_why_and_how_many_devices_fit() -> None:
    cfg, hw = bundled("llama-3-70b"), resolve_hardware(H100)
    result = search_layouts(cfg, hw, 8, TrainingSetup(seq_len=8192, global_batch=16))
    assert not result.ranked()
    out = does_not_fit(cfg, hw, result)
    assert "least memory" in out["reason"] and "80 GB" in out["reason"]
    assert out["nearest_miss"]["memory_bytes"]["total"] > out["nearest_miss"]["memory_bytes"]["capacity"]
    by_kind = {f["change"].split(" ", 1)[0]: f for f in out["fits_with"]}
    assert by_kind["devices"]["devices"] == 16 and by_kind["devices"]["fits"]  # 8 -> 16, not a bigger jump
    assert by_kind["offload"]["offload"] and by_kind["offload"]["fits"]
    rel = [f["relative_change"] for f in out["fits_with"]]
    assert rel == sorted(rel)


def test_a_device_count_nothing_divides_names_the_batch_rule_and_the_nearest_count() -> None:
    cfg, hw = bundled("llama-3.1-405b"), resolve_hardware(H100)
    result = search_layouts(cfg, hw, 16383, TrainingSetup(seq_len=8192, global_batch=2048))
    out = does_not_fit(cfg, hw, result)
    assert "batch" in out["reason"]
    first = out["fits_with"][0]
    assert first["change"] == "devices 16,383 -> 16,384" and first["layout"]["devices"] == 16384 and first["fits"]


RUNNER = CliRunner()


def test_the_cli_prints_the_reason_and_the_fix_and_exits_1() -> None:
    args = ["train-layouts", "llama-3-70b", "-H", H100, "--devices", "8", "--global-batch", "16", "--seq-len", "8192"]
    out = RUNNER.invoke(app, args)
    assert out.exit_code == 1, out.output
    assert "no layout fits: none of the" in out.output and "fits with devices 8 -> 16" in out.output
    js = RUNNER.invoke(app, [*args, "--json"])
    assert js.exit_code == 0 and json.loads(js.output)["does_not_fit"]["fits_with"]


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(create_app(Settings(database_url=f"sqlite:///{tmp_path / 'api.db'}", api_token="t"))) as c:
        yield c


def test_the_api_answers_why_and_the_smallest_change(client: TestClient) -> None:
    r = client.post(
        "/api/v1/training/layouts",
        json={"hardware": H100, "model": "llama-3-70b", "devices": 8, "global_batch": 16, "seq_len": 8192},
    )
    assert r.status_code == 200, r.text
    data = r.json()
    assert data["fit"] == 0 and data["fastest"] == []
    assert "least memory" in data["does_not_fit"]["reason"]
    assert any(f["change"] == "devices 8 -> 16" for f in data["does_not_fit"]["fits_with"])
    ok = client.post(
        "/api/v1/training/layouts",
        json={"hardware": H100, "model": "llama-3-8b", "devices": 8, "global_batch": 16, "seq_len": 4096, "top": 1},
    )
    assert "does_not_fit" not in ok.json()


def test_the_page_links_each_change_that_fits(tmp_path: Path) -> None:
    from tests.web.conftest import make_app

    with TestClient(make_app(tmp_path)) as c:
        r = c.get(
            f"/models/training?model=llama-3-70b&hardware={H100}&devices=8&global_batch=16&seq_len=8192&precision=bf16"
        )
    assert r.status_code == 200, r.text
    fixes = re.search(r'id="training-fixes">(.*?)</ul>', r.text, re.S)
    assert fixes is not None and "devices=16&amp;global_batch=16" in fixes.group(1)
    assert "least memory" in r.text


def test_a_checked_layout_no_single_change_fixes_names_a_layout_that_fits() -> None:
    """8 x H100, llama-3-8b at 131K tokens, pure dp: no single change fits; it said only "search with
    train-layouts". It now names the search's fastest fitting layout of the same devices, and exits 1."""
    args = ["train-layouts", "llama-3-8b", "-H", H100, "--devices", "8", "--global-batch", "16", "--seq-len", "131072"]
    out = RUNNER.invoke(app, [*args, "--dp", "8"])
    assert out.exit_code == 1, out.output
    assert "no single change makes it fit" in out.output and "another layout of 8 devices fits: tp=" in out.output
    js = RUNNER.invoke(app, [*args, "--dp", "8", "--json"])
    best = json.loads(js.output)["best_layout"]
    assert best["fits"] and best["layout"]["devices"] == 8


def test_a_batch_too_small_for_every_device_suggests_fewer_devices() -> None:
    """One 4096-token sequence cannot spread over 8,192 devices (tp <= 8, cp <= 16, pp <= 32 layers): half of them
    can hold it, and a batch of 2 fills them all."""
    cfg, hw = bundled("llama-3-8b"), resolve_hardware(H100)
    result = search_layouts(cfg, hw, 8192, TrainingSetup(seq_len=4096, global_batch=1))
    out = does_not_fit(cfg, hw, result)
    changes = [f["change"] for f in out["fits_with"]]
    assert changes[0] == "devices 8,192 -> 4,096" and "global batch 1 -> 2" in changes, changes


def test_the_cli_refuses_sizes_the_api_refuses() -> None:
    """--global-batch 1e12 was costed (a 2.2e9 s step); the API's bounds (2^24 sequences, 2^22 tokens, 2^20 devices)
    now hold on the CLI too."""
    for flag, value in (("--global-batch", "1000000000000"), ("--seq-len", "8388608"), ("--devices", "2097152")):
        args = ["train-layouts", "llama-3-8b", "-H", H100, "--devices", "8", flag, value]
        out = RUNNER.invoke(app, args)
        assert out.exit_code == 2 and "less than or equal" in out.output, (flag, out.output)
