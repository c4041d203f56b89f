"""For browser tests, screenshots and benchmarks: the real app (uvicorn) on a free local port in a background
thread, and demo runs."""

from __future__ import annotations

import random
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI

from api.main import create_app
from api.settings import Settings
from perfmodel.roofline import predict_many
from perfmodel.store import RunIn, Store, TraceKernelIn


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def live_server(data_dir: Path, token: str = "test-token") -> Iterator[tuple[str, FastAPI]]:
    """Yields (base URL, app) for an app on a temp SQLite database; stops it on exit."""
    settings = Settings(database_url=f"sqlite:///{data_dir / 'perfmodel.sqlite3'}", data_dir=data_dir,
                        api_token=token)
    app = create_app(settings)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, name="perfmodel-live-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the app did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}", app
    finally:
        server.should_exit = True
        thread.join(timeout=10)


DEVICES = ("nvidia-h100-sxm5-80gb", "nvidia-a100-sxm4-80gb", "amd-mi300x")


def random_op(rng: random.Random) -> dict[str, Any]:
    pick = rng.random()
    if pick < 0.5:
        return {"kind": "matmul", "m": rng.choice([16, 64, 512, 2048, 4096, 8192]),
                "n": rng.choice([1024, 4096, 6144, 14336]), "k": rng.choice([1024, 4096, 8192]), "dtype": "bf16"}
    if pick < 0.7:
        return {"kind": "rmsnorm", "shape": [rng.choice([16, 512, 4096, 16384]), 4096], "dtype": "bf16"}
    if pick < 0.85:
        return {"kind": "softmax", "shape": [rng.choice([64, 1024, 8192]), rng.choice([1024, 4096])], "dtype": "fp16"}
    return {"kind": "elementwise", "shape": [rng.choice([1024, 8192, 65536]), 4096], "dtype": "bf16", "inputs": 2}


def seed_runs(store: Store, n: int, seed_value: int = 0) -> None:
    """``n`` runs over three devices; measured = predicted × a log-normal factor (a model that is ~15 % off)."""
    rng = random.Random(seed_value)
    per = n // len(DEVICES)
    for d, hardware_id in enumerate(DEVICES):
        count = per if d < len(DEVICES) - 1 else n - per * (len(DEVICES) - 1)
        ops = [random_op(rng) for _ in range(count)]
        predicted = predict_many(hardware_id, ops).time_s
        runs = [RunIn(hardware_id=hardware_id, op=op, measured_time_s=float(t) * rng.lognormvariate(0.1, 0.2),
                      source="benchmark", tags={"name": f"{op['kind']}_kernel_{i}"}, dtype=op["dtype"])
                for i, (op, t) in enumerate(zip(ops, predicted, strict=True))]
        for start in range(0, len(runs), 5000):
            store.add_runs(runs[start:start + 5000])


def seed_trace(store: Store, kernels: int, hardware_id: str = DEVICES[0], seed_value: int = 1) -> int:
    """A synthetic uploaded trace of ``kernels`` launches on ``hardware_id`` (one stored kernel row each; nine in
    ten matched to a run, the rest unmodelled), as a training step's trace looks after matching: a few hundred
    distinct shapes, repeated. Returns the upload's id."""
    rng = random.Random(seed_value)
    shapes = [random_op(rng) for _ in range(300)]
    predicted = predict_many(hardware_id, shapes).time_s
    runs: list[RunIn] = []
    rows: list[TraceKernelIn] = []
    for i in range(kernels):
        s = rng.randrange(len(shapes))
        time_s = float(predicted[s]) * rng.lognormvariate(0.1, 0.2)
        if i % 10 == 9:
            rows.append(TraceKernelIn(name=f"ncclKernel_AllReduce_{i}", category="kernel", duration_s=time_s,
                                      reason="communication kernel (not modelled)"))
            continue
        name = f"{shapes[s]['kind']}_kernel_{s}"
        rows.append(TraceKernelIn(name=name, category="kernel", duration_s=time_s, op_kind=shapes[s]["kind"],
                                  run_index=len(runs)))
        runs.append(RunIn(hardware_id=hardware_id, op=shapes[s], measured_time_s=time_s, source="trace",
                          tags={"kernel": name}, dtype=shapes[s]["dtype"]))
    digest = f"{seed_value:064x}"
    return store.store_trace(hardware_id, f"synthetic_{kernels}_kernels.json", "kineto", kernels * 200, digest,
                             runs, rows).upload_id
