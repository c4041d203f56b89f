"""Load on the real server (uvicorn, SQLite): /predict at 1, 10 and 50 concurrent clients, and a
10,000-op /predict/batch. The load generator (uvloop, one keep-alive HTTP/1.1 connection per
client, pre-encoded requests, like wrk) runs on the same 2-core machine. ``server CPU/req`` is the
server processes' user + system CPU time (from /proc) over the requests answered: the figure that
does not depend on what else the machine runs.

    python benchmarks/api_load.py [--seconds 5] [--workers 1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import httpx
import uvloop

sys.path.insert(0, os.path.dirname(__file__))
from predict_speed import mixed_ops

from web.testing import free_port

HARDWARE = "nvidia-h100-sxm5-80gb"


def start_server(port: int, workers: int, data_dir: str, settings: dict[str, str] | None = None,
                 cwd: str | None = None, start_timeout_s: float = 60,
                 http: str | None = None) -> subprocess.Popen[bytes]:
    """uvicorn serving the app on 127.0.0.1:``port`` (SQLite in ``data_dir``; ``settings``: extra environment,
    e.g. PERFMODEL_* values), once /health answers. ``http``: uvicorn's HTTP protocol (default: the service's
    own, ``api.http_protocol``, where the served tree has it)."""
    if http is None:
        tree_has_it = os.path.exists(os.path.join(cwd or os.getcwd(), "api", "http_protocol.py"))
        http = "api.http_protocol:CombinedWritesProtocol" if tree_has_it else "auto"
    env = {**os.environ, "PERFMODEL_DATA_DIR": data_dir, **(settings or {})}
    env.pop("PERFMODEL_DATABASE_URL", None)
    command = [sys.executable, "-m", "uvicorn", "--factory", "api.main:create_app", "--host", "127.0.0.1",
               "--port", str(port), "--workers", str(workers), "--http", http, "--log-level", "warning",
               "--no-access-log"]
    server = subprocess.Popen(command, env=env, cwd=cwd)
    deadline = time.time() + start_timeout_s
    while time.time() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/v1/health", timeout=1).status_code == 200:
                return server
        except httpx.HTTPError:
            time.sleep(0.2)
    server.kill()
    raise RuntimeError("server did not start")


def request_bytes(port: int, path: str, body: dict[str, Any]) -> bytes:
    payload = json.dumps(body).encode()
    head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(payload)}\r\n\r\n")
    return head.encode() + payload


async def client_loop(port: int, requests: list[bytes], until: float, latencies: list[float],
                      rng: random.Random) -> None:
    """One keep-alive HTTP/1.1 connection sending pre-encoded requests back to back (like wrk)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        while time.perf_counter() < until:
            start = time.perf_counter()
            writer.write(rng.choice(requests))
            head = await reader.readuntil(b"\r\n\r\n")
            status = int(head[9:12])
            length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            await reader.readexactly(length)
            latencies.append(time.perf_counter() - start)
            if status != 200:
                raise RuntimeError(f"HTTP {status}")
    finally:
        writer.close()


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` and its children so far (Linux /proc)."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    pids = [pid]
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as children:
            pids += [int(p) for p in children.read().split()]
    except OSError:
        pass
    for p in pids:
        with open(f"/proc/{p}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


def wait_idle(pid: int, timeout_s: float = 300, quiet_cpu_s: float = 0.02) -> float:
    """Wait until the server's CPU clock stops moving: its background JIT load (``api.main``) compiles the GEMM
    kernels for tens of CPU seconds where numba's on-disk cache is cold (a fresh clone or worktree), which would
    be counted in every request measured while it runs. Returns the seconds waited."""
    start = time.perf_counter()
    last = cpu_seconds(pid)
    while time.perf_counter() - start < timeout_s:
        time.sleep(0.5)
        now = cpu_seconds(pid)
        if now - last < quiet_cpu_s:
            break
        last = now
    return time.perf_counter() - start


def core_bound_rate(server_cpu_s: float, client_cpu_s: float, cores: int = 2) -> float:
    """Requests/s the CPU alone would allow with the machine to themselves: one server worker (an event loop) on
    at most one core, the load generator (one process) on at most one, both on ``cores`` together; from each
    side's CPU seconds per request measured in the run. A same-run baseline: the rate measured over it is the
    share of the machine the run got (the rest went to other processes)."""
    if server_cpu_s <= 0 or client_cpu_s <= 0:
        raise ValueError("CPU seconds per request must be positive")
    return min(1.0 / server_cpu_s, 1.0 / client_cpu_s, cores / (server_cpu_s + client_cpu_s))


async def load(port: int, clients: int, seconds: float, ops: list[dict[str, Any]],
               server_pid: int) -> tuple[float, float, float, float, float]:
    requests = [request_bytes(port, "/api/v1/predict", {"hardware": HARDWARE, "op": op}) for op in ops]
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
        for op in ops:  # warm the server's caches and tables; check the answers once with a real client
            response = await http.post("/api/v1/predict", json={"hardware": HARDWARE, "op": op})
            response.raise_for_status()
            assert response.json()["time_s"] > 0
    latencies: list[float] = []
    cpu_before = cpu_seconds(server_pid)
    client_before = time.process_time()
    start = time.perf_counter()
    until = start + seconds
    await asyncio.gather(*(client_loop(port, requests, until, latencies, random.Random(i)) for i in range(clients)))
    elapsed = time.perf_counter() - start
    server_cpu = cpu_seconds(server_pid) - cpu_before
    client_cpu = time.process_time() - client_before
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))]
    return (len(latencies) / elapsed, statistics.median(latencies), p99, server_cpu / len(latencies),
            client_cpu / len(latencies))


def distinct_ops(count: int) -> list[dict[str, Any]]:
    """``count`` different ops: the mixed kinds with one dimension made unique per op."""
    ops = mixed_ops(count, seed=3)
    for i, op in enumerate(ops):
        if "shape" in op:
            op["shape"] = [1 + i, *op["shape"][1:]]
        else:
            key = next(k for k in ("m", "batch", "num_indices", "bytes") if k in op)
            op[key] = (1 + i) * (1 if key != "bytes" else 1000)
    return ops


def time_batch(base: str, batch: list[dict[str, Any]], layout: str) -> tuple[float, float, float, int]:
    """Median server time (Server-Timing) and round trip of five identical batch requests, after a warm-up."""
    server: list[float] = []
    wall: list[float] = []
    with httpx.Client(base_url=base, timeout=120) as http:
        body = {"hardware": HARDWARE, "ops": batch, "layout": layout}
        http.post("/api/v1/predict/batch", json=body).raise_for_status()
        for _ in range(5):
            start = time.perf_counter()
            response = http.post("/api/v1/predict/batch", json=body)
            wall.append(time.perf_counter() - start)
            response.raise_for_status()
            server.append(float(response.headers["server-timing"].split("dur=")[1]))
    distinct: int = response.json()["distinct_ops"]
    return statistics.median(server), statistics.median(wall) * 1e3, len(response.content) / 1e6, distinct


def in_process_cpu_ms(ops: list[dict[str, Any]], cache_size: int, rounds: int) -> float:
    """CPU ms per /predict through the whole ASGI app in this process (middlewares, routing, dependencies,
    validation, the model on a miss, serialisation; no sockets, no HTTP parsing): ``rounds`` passes over
    ``ops`` after a warm-up pass."""
    os.environ["PERFMODEL_DATA_DIR"] = tempfile.mkdtemp()
    os.environ.pop("PERFMODEL_DATABASE_URL", None)
    os.environ["PERFMODEL_PREDICTION_CACHE_SIZE"] = str(cache_size)
    from api.main import create_app

    app = create_app()
    bodies = [json.dumps({"hardware": HARDWARE, "op": op}).encode() for op in ops]

    async def one(body: bytes) -> None:
        sent: list[dict[str, Any]] = []
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
                 "scheme": "http", "path": "/api/v1/predict", "raw_path": b"/api/v1/predict", "query_string": b"",
                 "root_path": "", "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80),
                 "headers": [(b"host", b"x"), (b"content-type", b"application/json"),
                             (b"content-length", str(len(body)).encode())]}

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: Any) -> None:
            sent.append(message)

        await app(scope, receive, send)
        if sent[0]["status"] != 200:
            raise RuntimeError(f"HTTP {sent[0]['status']}")

    async def run() -> float:
        async with app.router.lifespan_context(app):
            try:  # the app loads the compiled kernels in a background thread: wait, so its CPU is not counted
                from perfmodel.search import gemm_kernel

                gemm_kernel.load()
            except ImportError:  # a tree without them
                pass
            for body in bodies:
                await one(body)
            start = time.process_time()
            for _ in range(rounds):
                for body in bodies:
                    await one(body)
            return (time.process_time() - start) / (rounds * len(bodies)) * 1e3

    return uvloop.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--workers", type=int, default=1, help="uvicorn worker processes")
    parser.add_argument("--no-batch", action="store_true", help="only the /predict load")
    parser.add_argument("--cache-size", type=int, default=65_536,
                        help="server prediction cache (0: every /predict computes, a search per GEMM)")
    parser.add_argument("--http", default=None,
                        help="uvicorn HTTP protocol (default: api.http_protocol:CombinedWritesProtocol; "
                             "'auto': uvicorn's own)")
    parser.add_argument("--in-process", action="store_true",
                        help="CPU per /predict through the ASGI app in this process, cache hits and misses")
    args = parser.parse_args()
    if args.in_process:
        ops = mixed_ops(200, seed=1)
        hit = in_process_cpu_ms(ops, 65_536, 10)
        miss = in_process_cpu_ms(ops, 0, 2)
        print(f"/predict in process ({len(ops)} mixed ops, {HARDWARE}): cache hit {hit:.3f} ms CPU/request, "
              f"miss (model run) {miss:.3f} ms CPU/request")
        return
    port = free_port()
    with tempfile.TemporaryDirectory() as data_dir:
        server = start_server(port, args.workers, data_dir, {"PERFMODEL_PREDICTION_CACHE_SIZE": str(args.cache_size)},
                              http=args.http)
        base = f"http://127.0.0.1:{port}"
        try:
            print(f"server idle after {wait_idle(server.pid):.1f} s (background JIT load)")
            ops = mixed_ops(200, seed=1)
            protocol = args.http or "api.http_protocol"
            print(f"server: uvicorn ({protocol}), {args.workers} worker(s), SQLite, prediction cache "
                  f"{args.cache_size:,}; {len(ops)} distinct ops, {HARDWARE}")
            print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores; "
                  "CPU-bound rate: what both sides' CPU per request allows with the machine to themselves "
                  "(core_bound_rate); got: the measured rate over it")
            print(f"{'clients':>8} {'requests/s':>11} {'p50 ms':>8} {'p99 ms':>8} {'server CPU/req ms':>18} "
                  f"{'client CPU/req ms':>18} {'CPU-bound rate':>15} {'got':>5}")
            for clients in (1, 10, 50):
                rate, p50, p99, cpu, client = uvloop.run(load(port, clients, args.seconds, ops, server.pid))
                bound = core_bound_rate(cpu, client, os.cpu_count() or 1)
                print(f"{clients:>8} {rate:>11,.0f} {p50 * 1e3:>8.2f} {p99 * 1e3:>8.2f} {cpu * 1e3:>18.3f} "
                      f"{client * 1e3:>18.3f} {bound:>15,.0f} {rate / bound:>5.0%}")
            print(f"goal at 50 clients, {args.workers} worker(s) (the goal: 1): >= 5,000 requests/s with p99 <= 20 ms: "
                  f"{'met' if rate >= 5000 and p99 <= 0.020 else 'missed'} ({rate:,.0f}/s, p99 {p99 * 1e3:.1f} ms; "
                  f"load average {os.getloadavg()[0]:.1f})")
            if args.no_batch:
                return
            print()
            cases = (("model-like mix", mixed_ops(10_000, seed=2), "rows"),
                     ("all distinct", distinct_ops(10_000), "rows"),
                     ("all distinct, layout=columns", distinct_ops(10_000), "columns"))
            for label, batch, layout in cases:
                server_ms, wall_ms, size_mb, distinct = time_batch(base, batch, layout)
                print(f"10,000-op /predict/batch, {label} ({distinct:,} distinct): server {server_ms:.0f} ms, "
                      f"round trip {wall_ms:.0f} ms ({size_mb:.1f} MB of JSON; median of 5)")
        finally:
            server.terminate()
            server.wait(timeout=30)


if __name__ == "__main__":
    main()
