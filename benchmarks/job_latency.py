"""/predict latency while calibrations are fitted, on the real server (uvicorn, SQLite, one worker).

Seeds the Vidur A100 kernel rows (``measured_data.vidur``, up to ``--runs``) as stored runs, then times
sequential /predict requests (one keep-alive client, ops never asked before, so no cache hits) for
``--seconds`` with the server idle, and again while ``--fits`` calibrations of those runs are in flight:
202 jobs polled to their end (this tree), or requests that block until the fit is done (an older tree that
fits inside the request: ``--server-root /tmp/pm-base``, POSTs sent from threads). Prints p50 / p99 latency
of both phases, the POSTs' answer times, the time until every fit ended, and the peak RSS of the server
with its worker processes.

    python benchmarks/job_latency.py [--runs 2000] [--fits 2] [--seconds 8] [--server-root PATH]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, os.path.dirname(__file__))
from api_load import distinct_ops, start_server
from measured_data import vidur

from web.testing import free_port

HW = "nvidia-a100-sxm4-80gb"
TOKEN = "bench-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
PREDICT_HW = "nvidia-h100-sxm5-80gb"


def seed(http: httpx.Client, count: int) -> int:
    rows = [r for r in vidur() if r.hardware == HW and r.timing == "kernel"][:count]
    runs = [{"hardware": HW, "op": r.op, "measured_time_s": r.measured_s, "source": "vidur"} for r in rows]
    for start in range(0, len(runs), 5000):
        http.post("/api/v1/runs/bulk", json=runs[start:start + 5000], headers=AUTH, timeout=300).raise_for_status()
    return len(runs)


def predict_latencies(http: httpx.Client, ops: list[dict[str, Any]], until: float) -> list[float]:
    out: list[float] = []
    while time.perf_counter() < until and ops:
        op = ops.pop()
        start = time.perf_counter()
        http.post("/api/v1/predict", json={"hardware": PREDICT_HW, "op": op}).raise_for_status()
        out.append(time.perf_counter() - start)
    return out


def summary(name: str, latencies: list[float]) -> str:
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return (f"{name:<28}{len(ordered):>7} requests   p50 {statistics.median(ordered) * 1e3:7.2f} ms   "
            f"p99 {p99 * 1e3:8.2f} ms   max {ordered[-1] * 1e3:8.1f} ms")


def tree_rss_bytes(root: int) -> int:
    """RSS of process ``root`` and all its descendants (from /proc)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    tree, grew = {root}, True
    while grew:
        more = {pid for pid, parent in parents.items() if parent in tree} - tree
        tree |= more
        grew = bool(more)
    total = 0
    for pid in tree:
        try:
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except OSError:
            continue
    return total


class PeakRss:
    """Peak RSS (MB) of a process and its children, sampled every 0.2 s."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak_mb, self._stop = pid, 0.0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            self.peak_mb = max(self.peak_mb, tree_rss_bytes(self.pid) / 1e6)

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.peak_mb


def fits_in_flight(base: str, fits: int, http: httpx.Client, ops: list[dict[str, Any]]) -> None:
    answers_s: list[float] = []
    done = threading.Event()
    urls: list[str] = []

    def post() -> None:
        with httpx.Client(base_url=base, timeout=3600) as own:
            start = time.perf_counter()
            response = own.post("/api/v1/calibrations", json={"hardware": HW, "filter": {"source": "vidur"}},
                                headers=AUTH)
            answers_s.append(time.perf_counter() - start)
            response.raise_for_status()
            if response.status_code == 202:
                urls.append(response.headers["location"])

    start = time.perf_counter()
    posters = [threading.Thread(target=post) for _ in range(fits)]
    for thread in posters:
        thread.start()

    def wait_all() -> None:
        for thread in posters:
            thread.join()
        with httpx.Client(base_url=base, timeout=60) as own:
            for url in urls:
                while own.get(url).json()["status"] in ("queued", "running"):
                    time.sleep(0.2)
        done.set()

    threading.Thread(target=wait_all, daemon=True).start()
    latencies: list[float] = []
    while not done.is_set() and ops:
        latencies += predict_latencies(http, ops, time.perf_counter() + 0.5)
    elapsed_s = time.perf_counter() - start
    print(summary(f"/predict during {fits} fit(s)", latencies))
    print(f"POST /calibrations answered in {', '.join(f'{s:.2f}' for s in sorted(answers_s))} s; "
          f"every fit ended after {elapsed_s:.1f} s")
    if urls:
        jobs = [http.get(u).json() for u in urls]
        print("jobs: " + ", ".join(f"{j['id']} {j['status']}" for j in jobs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--fits", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--server-root", type=Path, default=Path(__file__).resolve().parents[1])
    args = parser.parse_args()
    port = free_port()
    with tempfile.TemporaryDirectory() as data_dir:
        root = args.server_root.resolve()
        server = start_server(port, 1, data_dir, {"PERFMODEL_API_TOKEN": TOKEN, "PYTHONPATH": str(root)},
                              cwd=str(root), start_timeout_s=90)
        base = f"http://127.0.0.1:{port}"
        try:
            with httpx.Client(base_url=base, timeout=60) as http:
                print(f"server: {args.server_root}; {seed(http, args.runs)} stored runs of {HW}")
                ops = distinct_ops(60_000)
                predict_latencies(http, ops, time.perf_counter() + 1.0)  # warm up
                print(summary("/predict, server idle", predict_latencies(http, ops, time.perf_counter()
                                                                           + args.seconds)))
                rss = PeakRss(server.pid)
                fits_in_flight(base, args.fits, http, ops)
                print(f"peak RSS of the server and its workers: {rss.stop():.0f} MB")
        finally:
            server.terminate()
            server.wait(30)


if __name__ == "__main__":
    main()
