"""Screenshots of every dashboard page (1400×900 by default) into docs/screenshots/ (PNG), with Debian's Chromium.

    python benchmarks/screenshots.py [--chromium /usr/bin/chromium] [--runs 3000] [--only models --only sweeps]
                                     [--size 1920x1080] [--out /tmp/shots] [--full-page]

Starts the real app on a temp SQLite database, stores demo data (runs on three devices, a what-if device,
a trace when the trace API is there, a design-space sweep), and opens each page as a new user would.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import Page, sync_playwright

from web.testing import live_server, seed_runs

OUT = Path(__file__).resolve().parent.parent / "docs" / "screenshots"
TRACES = Path(__file__).resolve().parent.parent / "tests" / "data" / "traces"
TOKEN = "screenshot-token"
PAGES = (
    ("overview", "/"),
    ("hardware", "/hardware"),
    ("device", "/hardware/nvidia-h100-sxm5-80gb"),
    ("compare", "/compare?ids=nvidia-h100-sxm5-80gb&ids=amd-mi300x&ids=google-tpu-v5p&dtype=bf16&dtype=fp32"),
    ("roofline", "/roofline?hardware=nvidia-h100-sxm5-80gb&workload=llama3-8b-decode"),
    ("runs", "/runs"),
    ("runs-device", "/runs?hardware=nvidia-h100-sxm5-80gb"),
    ("upload", "/upload"),
    ("tiling", "/tiling?hardware=nvidia-h100-sxm5-80gb&m=4096&n=4096&k=4096&dtype=bf16"),
    ("whatif", "/whatif?hardware=nvidia-h100-sxm5-80gb&workload=llama3-8b-decode"),
    ("models", "/models?model=llama-3-70b&hardware=nvidia-h100-sxm5-80gb&devices=8&batch=16&prompt_tokens=2048"
               "&phase=decode"),
)
SWEEP = {"base": "nvidia-h100-sxm5-80gb",
         "axes": {"levels.dram.bandwidth_bytes_per_s": ["x0.5", "x1", "x1.5", "x2"],
                  "engines.*.peak_flops_per_s": ["x1", "x2"], "devices": [1, 2, 4, 8]},
         "workloads": [{"model": "llama-3-70b", "phase": "decode", "batch": 16, "kv_len": 4096},
                       {"model": "llama-3-8b", "phase": "decode", "batch": 16, "kv_len": 4096}]}


NCU = TRACES / "attention__actual_parameter_analysis__data__5-9__bert_flashattn_nsight.csv"
MLIR = TRACES.parent / "stablehlo" / "fori_loop_fp32.mlir"  # a jax fori_loop: the file form's loops table
KINETO = TRACES / "timeline_analysis__sampled_rank-0.json.gz"  # a training rank on an A100 (the device shown)


def upload_trace(base: str, path: Path | None) -> str | None:
    """Upload a trace through the API; None when there is no trace API or no such file."""
    if path is None or not path.is_file():
        return None
    with path.open("rb") as handle:
        response = httpx.post(f"{base}/api/v1/traces", headers={"Authorization": f"Bearer {TOKEN}"},
                              data={"hardware": "nvidia-a100-sxm4-80gb"}, files={"file": (path.name, handle)},
                              timeout=120)
    return str(response.json()["id"]) if response.status_code in (200, 201) else None


def store_sweep(store: Any) -> int:
    """What ``perfmodel sweep`` stores: the spec and every row, run here in-process."""
    from perfmodel.graph.sweep import SweepSpec, run_sweep

    spec = SweepSpec.from_json(SWEEP)
    return int(store.add_sweep("H100: DRAM bandwidth × FLOP/s × devices, Llama-3 decode", spec.to_json(),
                               run_sweep(spec)))


def shoot(page: Page, base: str, name: str, path: str, out: Path, full_page: bool) -> None:
    page.goto(base + path, wait_until="networkidle")
    page.wait_for_function("Array.from(document.querySelectorAll('.chart[data-figure]'))"
                           ".every(d => d.dataset.rendered === 'true')", timeout=60_000)
    page.screenshot(path=str(out / f"{name}.png"), full_page=full_page)
    print(f"{name}: {path}")


def shoot_model_file(page: Page, base: str, out: Path, full_page: bool) -> None:
    """The models page's file form after estimating a StableHLO fori_loop with its trip count given."""
    page.goto(base + "/models?model=gpt2&hardware=nvidia-h100-sxm5-80gb&phase=decode", wait_until="networkidle")
    page.locator("#model-file").set_input_files(str(MLIR))
    page.locator("#trip-counts").fill("%0=8")
    page.locator("#file-button").click()
    page.wait_for_selector("#file-result:not([hidden])", timeout=60_000)
    page.locator("#file-form").scroll_into_view_if_needed()
    page.screenshot(path=str(out / "models-file.png"), full_page=full_page)
    print("models-file: /models (file form)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--runs", type=int, default=3000)
    parser.add_argument("--only", action="append", help="shoot only this page (its file name, repeatable)")
    parser.add_argument("--size", default="1400x900", help="viewport WIDTHxHEIGHT (check 1400x900 and 1920x1080)")
    parser.add_argument("--out", type=Path, default=OUT, help="folder for the PNGs (default docs/screenshots)")
    parser.add_argument("--full-page", action="store_true", help="the whole page, not the first screen")
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.lower().split("x"))
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, live_server(Path(tmp), TOKEN) as (base, app):
        seed_runs(app.state.perfmodel.store, args.runs)
        pages = list(PAGES)
        pages.append(("sweeps", f"/sweeps/{store_sweep(app.state.perfmodel.store)}"))
        for name, file in (("roofline-trace", KINETO), ("roofline-counters", NCU)):
            trace = upload_trace(base, file) if not args.only or name in args.only else None
            if trace:
                pages.append((name, f"/roofline?hardware=nvidia-a100-sxm4-80gb&workload=trace&trace={trace}"))
        pages = [(name, path) for name, path in pages if not args.only or name in args.only]
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=args.chromium,
                                        args=["--enable-unsafe-swiftshader", "--use-angle=swiftshader"])
            page = browser.new_page(viewport={"width": width, "height": height})
            for name, path in pages:
                shoot(page, base, name, path, args.out, args.full_page)
            if not args.only or "models-file" in args.only:
                shoot_model_file(page, base, args.out, args.full_page)
            browser.close()


if __name__ == "__main__":
    main()
