"""Dashboard speed: store 10,000 runs in a temp SQLite database and time the runs page (cold, then warm).

    python benchmarks/dashboard_speed.py [--runs 10000] [--chromium /usr/bin/chromium]

Server side over HTTP (uvicorn, 1 worker): cold is the first request after the runs were written (every run
predicted, figures built), warm the same page again (from the view cache, keyed by the data version). With
Chromium and Playwright installed it also times the page in the browser, from navigation until the WebGL
scatter and the histogram are drawn.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import httpx

from web.testing import live_server, seed_runs


def browser_time(base: str, chromium: str) -> list[float]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return []
    if not Path(chromium).exists():
        return []
    times = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium,
                                    args=["--enable-unsafe-swiftshader", "--use-angle=swiftshader"])
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        for _ in range(2):  # first: plotly.js not cached yet; second: from the HTTP cache
            start = time.perf_counter()
            page.goto(f"{base}/runs")
            page.wait_for_function("Array.from(document.querySelectorAll('.chart[data-figure]'))"
                                   ".every(d => d.dataset.rendered === 'true')", timeout=60_000)
            times.append(time.perf_counter() - start)
        browser.close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, live_server(Path(tmp)) as (base, app):
        start = time.perf_counter()
        seed_runs(app.state.perfmodel.store, args.runs)
        print(f"stored {args.runs:,} runs in {time.perf_counter() - start:.1f} s")
        with httpx.Client(timeout=120) as client:
            for label in ("cold", "warm", "warm"):
                start = time.perf_counter()
                response = client.get(f"{base}/runs")
                elapsed = time.perf_counter() - start
                response.raise_for_status()
                print(f"/runs {label} (server): {elapsed * 1000:.0f} ms, {len(response.content) / 1e6:.2f} MB of HTML")
        for label, seconds in zip(("first visit", "next visit"), browser_time(base, args.chromium), strict=False):
            print(f"/runs in Chromium, {label} (until both charts are drawn): {seconds * 1000:.0f} ms")


if __name__ == "__main__":
    main()
