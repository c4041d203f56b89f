"""Dashboard speed at scale: 100,000 stored runs and a 100,000-kernel trace, each page timed on the server and
in Chromium.

    python benchmarks/dashboard_speed.py [--runs 100000] [--kernels 100000] [--data /tmp/dash-db]
                                         [--chromium /usr/bin/chromium] [--no-browser]

The store (SQLite) holds a synthetic trace of ``--kernels`` launches (nine in ten matched to runs) and enough
plain runs for ``--runs`` in all. With ``--data`` the seeded database is kept there and reused (seeding is
deterministic), so the same database can be timed by an older checkout (``PYTHONPATH=/old/tree``).

Server: the real app under uvicorn in this process, timed once its start-up warm-up is done; each page is
asked for twice: ``cold`` (first request: built from the database) and ``warm`` (the view cache, keyed by the
data version). Wall ms over HTTP and CPU ms of this process (server and client, all threads:
``time.process_time``), and the HTML size. Browser: with
Chromium and Playwright, each page's first contentful paint and the time until every chart is drawn, on a
second visit (plotly.js from the HTTP cache), at 1400×900.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx

from web.testing import live_server

H100 = "nvidia-h100-sxm5-80gb"
# arrow functions: Playwright polls a bare expression through eval, which the dashboard's CSP refuses
PAINTED = "() => performance.getEntriesByName('first-contentful-paint').length > 0"
DRAWN = "() => Array.from(document.querySelectorAll('.chart[data-figure]')).every(d => d.dataset.rendered === 'true')"


def seed(store: Any, runs: int, kernels: int) -> None:
    """The trace first, then plain runs up to ``runs`` in all."""
    from web.testing import seed_runs, seed_trace

    start = time.perf_counter()
    trace_runs = 0
    if kernels:
        trace_id = seed_trace(store, kernels, H100)
        trace_runs = store.list_runs(trace_upload_id=trace_id, limit=1)[1]
    seed_runs(store, max(runs - trace_runs, 0))
    print(f"stored {runs:,} runs ({trace_runs:,} from a {kernels:,}-kernel trace) in "
          f"{time.perf_counter() - start:.1f} s")


def wait_for_warm_up() -> None:
    """Let the dashboard's start-up warm-up (``web/warmup.py``: plotly classes, spec library, templates; and
    ``web/stored_runs.py``: the stored runs' columns) finish before timing pages, and say what it cost; a checkout
    without them has nothing to wait for."""
    threads = [t for t in threading.enumerate() if t.name in ("perfmodel-dashboard-warm-up", "perfmodel-run-columns")]
    wall, cpu = time.perf_counter(), time.process_time()
    for thread in threads:
        thread.join(timeout=300)
    if threads:
        print(f"start-up warm-up: waited {(time.perf_counter() - wall) * 1000:.0f} ms wall, "
              f"{(time.process_time() - cpu) * 1000:.0f} ms CPU (the rest ran while the server started)")


def pages(trace_id: int | None) -> list[tuple[str, str]]:
    out = [("home", "/"), ("runs", "/runs"), ("runs, one device", f"/runs?hardware={H100}"), ("upload", "/upload"),
           ("roofline, stored runs", f"/roofline?hardware={H100}&workload=runs")]
    if trace_id is not None:
        out += [("runs of the trace", f"/runs?trace={trace_id}"),
                ("roofline of the trace", f"/roofline?hardware={H100}&workload=trace&trace={trace_id}")]
    return out


def server_times(base: str, paths: list[tuple[str, str]]) -> None:
    with httpx.Client(timeout=300) as client:
        for label, path in paths:
            for when in ("cold", "warm"):
                wall, cpu = time.perf_counter(), time.process_time()
                response = client.get(base + path)
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                response.raise_for_status()
                print(f"{label:24s} {when}: {wall * 1000:7.0f} ms wall, {cpu * 1000:7.0f} ms CPU, "
                      f"{len(response.content) / 1e6:6.2f} MB HTML")


def browser_times(base: str, chromium: str, paths: list[tuple[str, str]]) -> None:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        print("browser: playwright is not installed")
        return
    if not Path(chromium).exists():
        print(f"browser: no Chromium at {chromium}")
        return
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium,
                                    args=["--enable-unsafe-swiftshader", "--use-angle=swiftshader"])
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(f"{base}/runs?hardware=none")  # plotly.js into the HTTP cache
        for label, path in paths:
            start = time.perf_counter()
            page.goto(base + path)
            page.wait_for_function(DRAWN, timeout=120_000)
            drawn = time.perf_counter() - start
            page.wait_for_function(PAINTED, timeout=10_000)
            paint = page.evaluate("() => (performance.getEntriesByName('first-contentful-paint')[0] || {}).startTime")
            paint_text = f"{paint:6.0f} ms" if paint is not None else "     – ms"
            print(f"{label:24s} browser: first paint {paint_text}, charts drawn {drawn * 1000:6.0f} ms")
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--kernels", type=int, default=100_000)
    parser.add_argument("--data", type=Path, help="keep (and reuse) the seeded database in this folder")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--no-browser", action="store_true")
    args = parser.parse_args()
    with ExitStack() as stack:
        data = args.data or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        data.mkdir(parents=True, exist_ok=True)
        fresh = not (data / "perfmodel.sqlite3").exists()
        base, app = stack.enter_context(live_server(data))
        store = app.state.perfmodel.store
        if fresh:
            seed(store, args.runs, args.kernels)
        uploads = store.list_trace_uploads()
        total = store.list_runs(limit=1)[1]
        print(f"{total:,} runs stored, {len(uploads)} trace upload(s)")
        paths = pages(uploads[-1].id if uploads else None)
        wait_for_warm_up()
        server_times(base, paths)
        if not args.no_browser:
            browser_times(base, args.chromium, paths)


if __name__ == "__main__":
    main()
