"""Load on the real server (uvicorn, SQLite): /predict at 1, 10 and 50 concurrent clients, and a
10,000-op /predict/batch. The load generator (asyncio + httpx) runs on the same 2-core machine.

    python benchmarks/api_load.py [--seconds 5] [--workers 1]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import httpx

sys.path.insert(0, os.path.dirname(__file__))
from predict_speed import mixed_ops

HARDWARE = "nvidia-h100-sxm5-80gb"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def start_server(port: int, workers: int, data_dir: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PERFMODEL_DATA_DIR": data_dir}
    env.pop("PERFMODEL_DATABASE_URL", None)
    command = [sys.executable, "-m", "uvicorn", "--factory", "api.main:create_app", "--host", "127.0.0.1",
               "--port", str(port), "--workers", str(workers), "--log-level", "warning", "--no-access-log"]
    server = subprocess.Popen(command, env=env)
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/v1/health", timeout=1).status_code == 200:
                return server
        except httpx.HTTPError:
            time.sleep(0.2)
    server.kill()
    raise RuntimeError("server did not start")


async def client_loop(http: httpx.AsyncClient, ops: list[dict[str, Any]], until: float,
                      latencies: list[float], rng: random.Random) -> None:
    while time.perf_counter() < until:
        body = {"hardware": HARDWARE, "op": rng.choice(ops)}
        start = time.perf_counter()
        response = await http.post("/api/v1/predict", json=body)
        latencies.append(time.perf_counter() - start)
        response.raise_for_status()


async def load(base: str, clients: int, seconds: float, ops: list[dict[str, Any]]) -> tuple[float, float, float]:
    latencies: list[float] = []
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=30) as http:
        for op in ops:  # warm the server's caches and tables
            await http.post("/api/v1/predict", json={"hardware": HARDWARE, "op": op})
        start = time.perf_counter()
        until = start + seconds
        await asyncio.gather(*(client_loop(http, ops, until, latencies, random.Random(i)) for i in range(clients)))
        elapsed = time.perf_counter() - start
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))]
    return len(latencies) / elapsed, statistics.median(latencies), p99


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--workers", type=int, default=1, help="uvicorn worker processes")
    args = parser.parse_args()
    port = free_port()
    with tempfile.TemporaryDirectory() as data_dir:
        server = start_server(port, args.workers, data_dir)
        base = f"http://127.0.0.1:{port}"
        try:
            ops = mixed_ops(200, seed=1)
            print(f"server: uvicorn, {args.workers} worker(s), SQLite; {len(ops)} distinct ops, {HARDWARE}")
            print(f"{'clients':>8} {'requests/s':>11} {'p50 ms':>8} {'p99 ms':>8}")
            for clients in (1, 10, 50):
                rate, p50, p99 = asyncio.run(load(base, clients, args.seconds, ops))
                print(f"{clients:>8} {rate:>11,.0f} {p50 * 1e3:>8.2f} {p99 * 1e3:>8.2f}")
            batch = mixed_ops(10_000, seed=2)
            with httpx.Client(base_url=base, timeout=120) as http:
                http.post("/api/v1/predict/batch", json={"hardware": HARDWARE, "ops": batch[:10]})
                start = time.perf_counter()
                response = http.post("/api/v1/predict/batch", json={"hardware": HARDWARE, "ops": batch})
                wall = time.perf_counter() - start
            response.raise_for_status()
            server_ms = float(response.headers["server-timing"].split("dur=")[1])
            print(f"\n10,000-op /predict/batch: server {server_ms:.0f} ms, round trip {wall * 1e3:.0f} ms "
                  f"({len(response.content) / 1e6:.1f} MB of JSON)")
        finally:
            server.terminate()
            server.wait(timeout=30)


if __name__ == "__main__":
    main()
