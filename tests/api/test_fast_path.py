"""The /predict fast path: replayed response bytes (api.response_cache) answer exactly what the endpoint
answers, and only where that cannot go stale; the combined-writes transport (api.http_protocol) sends every byte,
in order, and a small response in one write."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from typing import Any

import pytest
from fastapi.testclient import TestClient
from live_server import live_server

from api.http_protocol import COMBINE_MAX_BYTES, CombinedWrites
from api.main import create_app
from api.settings import Settings
from api.state import AppState

TOKEN = "test-token-123"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
H100 = "nvidia-h100-sxm5-80gb"
MATMUL = {"kind": "matmul", "m": 512, "n": 768, "k": 1024, "dtype": "bf16"}
VOLATILE = {"server-timing"}  # the only header that differs between two answers to one question


def client_for(tmp_path: Any, **overrides: Any) -> TestClient:
    settings = Settings(database_url=f"sqlite:///{tmp_path}/db.sqlite3", api_token=TOKEN, **overrides)
    return TestClient(create_app(settings))


def replayed(client: TestClient) -> int:
    state: AppState = client.app.state.perfmodel  # type: ignore[attr-defined]
    return len(state._responses)


def headers_of(response: Any) -> dict[str, str]:
    return {k: v for k, v in response.headers.items() if k not in VOLATILE}


def test_a_replayed_answer_is_byte_identical(tmp_path: Any) -> None:
    body = json.dumps({"hardware": H100, "op": MATMUL}).encode()
    with client_for(tmp_path) as client:
        first = client.post("/api/v1/predict", content=body, headers={"content-type": "application/json"})
        assert first.status_code == 200 and replayed(client) == 1
        second = client.post("/api/v1/predict", content=body, headers={"content-type": "application/json"})
        assert second.status_code == 200 and replayed(client) == 1
        assert second.content == first.content and headers_of(second) == headers_of(first)
        assert second.headers["x-content-type-options"] == "nosniff" and second.headers["x-perfmodel-version"]
        # the same question in other bytes takes the normal path and gets the same answer
        other = client.post("/api/v1/predict", json={"op": MATMUL, "hardware": H100})
        assert other.content == first.content and replayed(client) == 2


@pytest.mark.parametrize("payload, status", [
    ({"hardware": H100, "op": {**MATMUL, "m": -1}}, 422),
    ({"hardware": "no-such-gpu", "op": MATMUL}, 404),
    ({"hardware": H100, "op": MATMUL, "extra": 1}, 422),
])
def test_errors_are_never_replayed(tmp_path: Any, payload: dict[str, Any], status: int) -> None:
    with client_for(tmp_path) as client:
        answers = [client.post("/api/v1/predict", json=payload) for _ in range(2)]
        assert [a.status_code for a in answers] == [status, status] and answers[0].json() == answers[1].json()
        assert replayed(client) == 0


def test_malformed_json_and_oversized_bodies_keep_their_status(tmp_path: Any) -> None:
    with client_for(tmp_path, max_body_bytes=200) as client:
        for _ in range(2):
            bad = client.post("/api/v1/predict", content=b'{"hardware": ', headers={"content-type": "application/json"})
            assert bad.status_code == 422 and bad.json()["field"] == "body"
            big = client.post("/api/v1/predict", json={"hardware": H100, "op": MATMUL, "pad": "x" * 300})
            assert big.status_code == 413
        assert replayed(client) == 0


def test_calibrations_and_custom_devices_are_not_replayed(tmp_path: Any) -> None:
    with client_for(tmp_path) as client:
        latest = client.post("/api/v1/predict", json={"hardware": H100, "op": MATMUL, "calibration": "latest"})
        assert latest.status_code in (200, 404, 422)  # "latest" may change once a calibration is fitted
        variant = {"base": H100, "id": "my-gpu", "overrides": {"levels.dram.bandwidth_bytes_per_s": "x2"}}
        created = client.post("/api/v1/hardware", json=variant, headers=AUTH)
        assert created.status_code == 201, created.text
        custom = client.post("/api/v1/predict", json={"hardware": "my-gpu", "op": MATMUL})
        assert custom.status_code == 200  # a stored device can be replaced: its answers are not replayed
        assert replayed(client) == 0
        client.post("/api/v1/predict", json={"hardware": H100, "op": MATMUL, "calibration": "none"})
        assert replayed(client) == 1


def test_reads_that_need_a_token_are_never_replayed(tmp_path: Any) -> None:
    with client_for(tmp_path, read_requires_token=True) as client:
        body = {"hardware": H100, "op": MATMUL}
        assert client.post("/api/v1/predict", json=body, headers=AUTH).status_code == 200
        assert client.post("/api/v1/predict", json=body).status_code == 401
        assert replayed(client) == 0


def test_no_replay_without_a_prediction_cache(tmp_path: Any) -> None:
    with client_for(tmp_path, prediction_cache_size=0) as client:
        for _ in range(2):
            assert client.post("/api/v1/predict", json={"hardware": H100, "op": MATMUL}).status_code == 200
        assert replayed(client) == 0


class RecordingTransport:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_write_buffer_size(self) -> int:
        return 0


def test_combined_writes_send_every_byte_in_order() -> None:
    async def scenario() -> list[list[bytes]]:
        transport = RecordingTransport()
        combined = CombinedWrites(transport, asyncio.get_running_loop())  # type: ignore[arg-type]
        head = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n"
        combined.write(head)
        combined.write(b"{}")  # same loop step: one write
        steps = [list(transport.writes)]
        transport.writes.clear()
        combined.write(head)  # a head whose body is not ready: written at the next iteration
        await asyncio.sleep(0)
        steps.append(list(transport.writes))
        transport.writes.clear()
        big = b"x" * (COMBINE_MAX_BYTES + 1)
        combined.write(head)
        combined.write(big)  # a large body is not copied behind its head
        steps.append(list(transport.writes))
        transport.writes.clear()
        combined.write(head)
        combined.close()  # closing sends what waits first
        steps.append([*transport.writes, b"closed" if transport.closed else b"open"])
        assert combined.get_write_buffer_size() == 0  # the rest is the wrapped transport's
        return steps

    one, two, large, three = asyncio.run(scenario())
    head = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n"
    assert one == [head + b"{}"] and two == [head] and three == [head, b"closed"]
    assert large == [head, b"x" * (COMBINE_MAX_BYTES + 1)]


def test_the_protocol_serves_keep_alive_requests(tmp_path: Any) -> None:
    """uvicorn with ``--http api.http_protocol:CombinedWritesProtocol`` (as live_server starts it): several
    requests on one keep-alive connection, each answer whole, with the middlewares' headers."""
    with live_server(f"sqlite:///{tmp_path}/db.sqlite3", TOKEN, workers=1) as base:
        port = int(base.rsplit(":", 1)[1])
        payload = json.dumps({"hardware": H100, "op": MATMUL}).encode()
        request = (b"POST /api/v1/predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   b"Content-Length: %d\r\n\r\n%b" % (len(payload), payload))
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            bodies = []
            for _ in range(3):
                sock.sendall(request)
                data = b""
                while b"\r\n\r\n" not in data or len(data) < data.index(b"\r\n\r\n") + 4 + int(
                        data.lower().split(b"content-length: ")[1].split(b"\r\n")[0]):
                    chunk = sock.recv(65536)
                    assert chunk, "connection closed"
                    data += chunk
                head, _, body = data.partition(b"\r\n\r\n")
                assert head.startswith(b"HTTP/1.1 200") and b"x-frame-options: DENY" in head
                bodies.append(body)
                time.sleep(0.01)
        assert bodies[0] == bodies[1] == bodies[2] and json.loads(bodies[0])["time_s"] > 0
