"""A small typed client of the perfmodel REST API, for compiler teams.

    from perfmodel.client import Client
    with Client("http://127.0.0.1:8000", token="pm_...") as pm:
        pm.predict("nvidia-h100-sxm5-80gb", {"kind": "matmul", "m": 4096, "n": 4096, "k": 4096, "dtype": "bf16"})
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from types import TracebackType
from typing import Any

import httpx

JSON = dict[str, Any]
JOB_ENDED = ("succeeded", "failed", "cancelled", "interrupted")


class ApiError(RuntimeError):
    """A 4xx/5xx answer: the status, the server's detail and the field it names."""

    def __init__(self, status: int, detail: str, field: str | None = None) -> None:
        super().__init__(f"{status}: {detail}" + (f" (field {field})" if field else ""))
        self.status = status
        self.detail = detail
        self.field = field


class Client:
    """Methods mirror the endpoints under /api/v1; every response is the server's JSON."""

    def __init__(self, base_url: str, token: str | None = None, timeout_s: float = 60.0,
                 transport: httpx.BaseTransport | None = None) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=base_url.rstrip("/") + "/api/v1", headers=headers, timeout=timeout_s,
                                  transport=transport)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self._http.request(method, path, **kwargs)
        if response.status_code >= 400:
            try:
                body = response.json()
            except ValueError:
                body = {"detail": response.text}
            raise ApiError(response.status_code, str(body.get("detail")), body.get("field"))
        return None if response.status_code == 204 else response.json()

    # hardware
    def hardware(self) -> list[JSON]:
        items: list[JSON] = self._call("GET", "/hardware")["items"]
        return items

    def hardware_spec(self, hardware_id: str) -> JSON:
        out: JSON = self._call("GET", f"/hardware/{hardware_id}")
        return out

    def add_hardware(self, spec: JSON) -> JSON:
        out: JSON = self._call("POST", "/hardware", json=spec)
        return out

    def add_variant(self, base: str, new_id: str, overrides: JSON) -> JSON:
        return self.add_hardware({"base": base, "id": new_id, "overrides": overrides})

    # predictions
    def predict(self, hardware: str, op: JSON, timing: str = "kernel", warm_cache: bool = False,
                calibration: str | int | None = None) -> JSON:
        out: JSON = self._call("POST", "/predict", json={"hardware": hardware, "op": op, "timing": timing,
                                                         "warm_cache": warm_cache, "calibration": calibration})
        return out

    def predict_batch(self, hardware: str, ops: list[JSON], timing: str = "kernel",
                      space: str = "compact") -> list[JSON]:
        results: list[JSON] = self._call("POST", "/predict/batch", json={
            "hardware": hardware, "ops": ops, "timing": timing, "space": space})["results"]
        return results

    def predict_columns(self, hardware: str, ops: list[JSON], timing: str = "kernel",
                        space: str = "compact") -> JSON:
        """The batch as one array per field (``layout=columns``): the fastest form for large batches."""
        columns: JSON = self._call("POST", "/predict/batch", json={
            "hardware": hardware, "ops": ops, "timing": timing, "space": space, "layout": "columns"})["columns"]
        return columns

    def search(self, hardware: str, op: JSON, top_k: int = 5, budget: int | None = None, seed: int = 0) -> JSON:
        out: JSON = self._call("POST", "/search", json={"hardware": hardware, "op": op, "top_k": top_k,
                                                        "budget": budget, "seed": seed})
        return out

    # measured runs
    def add_run(self, hardware: str, op: JSON, measured_time_s: float, source: str,
                tags: dict[str, str] | None = None) -> JSON:
        body = {"hardware": hardware, "op": op, "measured_time_s": measured_time_s, "source": source,
                "tags": tags or {}}
        out: JSON = self._call("POST", "/runs", json=body)
        return out

    def add_runs(self, runs: list[JSON]) -> list[int]:
        ids: list[int] = self._call("POST", "/runs/bulk", json=runs)["ids"]
        return ids

    def runs(self, hardware: str | None = None, op_kind: str | None = None, source: str | None = None,
             tags: dict[str, str] | None = None, created_after: datetime | None = None,
             created_before: datetime | None = None, limit: int = 100, offset: int = 0) -> JSON:
        params: list[tuple[str, str | int]] = [("limit", limit), ("offset", offset)]
        for key, value in (("hardware", hardware), ("op_kind", op_kind), ("source", source)):
            if value is not None:
                params.append((key, value))
        for key, stamp in (("created_after", created_after), ("created_before", created_before)):
            if stamp is not None:
                params.append((key, stamp.isoformat()))
        params.extend(("tag", f"{k}:{v}") for k, v in (tags or {}).items())
        out: JSON = self._call("GET", "/runs", params=params)
        return out

    def run(self, run_id: int) -> JSON:
        out: JSON = self._call("GET", f"/runs/{run_id}")
        return out

    def delete_run(self, run_id: int) -> None:
        self._call("DELETE", f"/runs/{run_id}")

    def comparisons(self, hardware: str | None = None, calibration: str | None = None,
                    op_kind: str | None = None) -> JSON:
        params = {k: v for k, v in (("hardware", hardware), ("calibration", calibration), ("op_kind", op_kind)) if v}
        out: JSON = self._call("GET", "/comparisons", params=params)
        return out

    # calibrations (a job: POST answers 202 with its URL, the fit runs in the service's worker pool)
    def calibrate(self, hardware: str, run_filter: JSON | None = None, *, base_calibration: int | None = None,
                  folds: int = 5, notes: str | None = None,
                  progress: Callable[[str, float], None] | None = None, poll_s: float = 0.5,
                  timeout_s: float = 3600.0) -> JSON:
        """Fit a calibration of ``hardware`` on its stored runs that ``run_filter`` picks (``trace_upload_id``,
        ``op_kind``, ``source``, ``tags``, ...) and return it (``GET /calibrations/{id}``). POSTs the job, then
        polls its URL every ``poll_s`` seconds, calling ``progress(stage, fraction 0..1)`` at each change.
        ApiError: a refusal (4xx at once), or the job failed, was cancelled or interrupted (its reason), or did
        not end within ``timeout_s`` seconds (status 504; the job goes on: ``job(id)`` shows it)."""
        body = {"hardware": hardware, "filter": run_filter or {}, "base_calibration": base_calibration,
                "folds": folds, "notes": notes}
        job: JSON = self._call("POST", "/calibrations", json=body)
        deadline_s = time.monotonic() + timeout_s
        seen: tuple[str, float] | None = None
        while True:
            state = (str(job.get("stage") or job["status"]), float(job.get("progress") or 0.0))
            if progress is not None and state != seen:
                progress(*state)
                seen = state
            if job["status"] in JOB_ENDED:
                break
            if time.monotonic() >= deadline_s:
                raise ApiError(504, f"calibration job {job['id']} still {job['status']} after {timeout_s:.0f} s")
            time.sleep(poll_s)
            job = self.job(int(job["id"]))
        if job["status"] != "succeeded":
            raise ApiError(422 if job["status"] == "failed" else 409,
                           f"calibration job {job['id']} {job['status']}: {job.get('error') or 'no reason given'}")
        return self.calibration(int(job["result"]["calibration_id"]))

    def calibration(self, calibration_id: int) -> JSON:
        out: JSON = self._call("GET", f"/calibrations/{calibration_id}")
        return out

    def job(self, job_id: int) -> JSON:
        out: JSON = self._call("GET", f"/jobs/{job_id}")
        return out

    def cancel_job(self, job_id: int) -> JSON:
        out: JSON = self._call("DELETE", f"/jobs/{job_id}")
        return out
