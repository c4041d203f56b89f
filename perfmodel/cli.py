"""The ``perfmodel`` command: hardware catalog, single-op predictions, a demo table."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer

from perfmodel import __version__
from perfmodel.advice.cli import advise_app
from perfmodel.cli_common import PlainGroup, fail, open_store, refuse_if_read_only
from perfmodel.cli_fast import CliError, hardware_list_text, predict_text, stored_calibration
from perfmodel.cli_fast import parse_value as parse_value
from perfmodel.cli_fast import render_cost as render_cost
from perfmodel.cli_fast import resolve_hardware as resolve_hardware
from perfmodel.graph.cli import estimate_command, sweep_command
from perfmodel.token_cli import token_app
from perfmodel.training.cli import train_layouts_command
from perfmodel.units import format_bytes, format_rate, format_time_s

# The model code (numpy, pydantic, scipy) is imported inside the commands that use it, so `perfmodel --help`
# starts in well under 0.3 s (benchmarks/cli_start.py).
# `hardware list` and `predict` run in perfmodel.cli_fast without this module (nor typer) where their arguments
# are plain; the commands here call the same functions.
# rich_markup_mode=None: click's plain help and usage errors (for every sub-command too); typer's rich help
# imports rich, ~0.2 s CPU of the ~0.4 s `perfmodel --help` took (benchmarks/cli_start.py). Progress bars still
# use rich, imported by the commands that draw them.
app = typer.Typer(help="Roofline performance model for deep-learning operators.", no_args_is_help=True,
                  add_completion=False, rich_markup_mode=None, cls=PlainGroup)
hardware_app = typer.Typer(help="The hardware library.", no_args_is_help=True, cls=PlainGroup)
app.add_typer(hardware_app, name="hardware")
app.add_typer(token_app, name="token")
app.add_typer(advise_app, name="advise")


def parse_assignments(pairs: list[str]) -> dict[str, Any]:
    from perfmodel.cli_fast import parse_assignments as parse

    try:
        return parse(pairs)
    except CliError as exc:
        fail(str(exc))


@hardware_app.command("list")
def hardware_list(
    vendor: str = typer.Option(None, help="only this vendor"),
    kind: str = typer.Option(None, help="gpu, npu, tpu or cpu"),
    as_json: bool = typer.Option(False, "--json", help="machine-readable output"),
) -> None:
    """List the bundled devices."""
    typer.echo(hardware_list_text(vendor, kind, as_json))


@hardware_app.command("show")
def hardware_show(hardware_id: str, as_json: bool = typer.Option(False, "--json")) -> None:
    """Show one device with the source of every number."""
    from perfmodel.specs import load_hardware

    try:
        h = load_hardware(hardware_id)
    except KeyError as exc:
        fail(str(exc.args[0]))
        return
    if as_json:
        typer.echo(json.dumps({**h.model_dump(mode="json"), "content_hash": h.content_hash}, indent=2))
        return
    typer.echo(f"{h.name} ({h.id}), {h.kind}, {h.units} {h.unit_name}s"
               + (f", {h.clock_hz / 1e9:.3g} GHz" if h.clock_hz else ""))
    typer.echo(f"  source: {h.source}")
    for e in h.engines:
        peaks = ", ".join(f"{d.value} {format_rate(v, 'FLOP/s')}" for d, v in e.peak_flops_per_s.items())
        typer.echo(f"  engine {e.name} ({e.engine_class}): {peaks}")
        typer.echo(f"    source: {e.citation('peak_flops_per_s')}")
    for lv in h.levels:
        cap = format_bytes(lv.capacity_bytes) + (" per unit" if lv.per_unit else "") if lv.capacity_bytes else "?"
        bw = format_rate(lv.bandwidth_bytes_per_s, "B/s") if lv.bandwidth_bytes_per_s else "?"
        lat = format_time_s(lv.latency_s) if lv.latency_s else "?"
        typer.echo(f"  level {lv.name} ({lv.kind}): {cap}, {bw}, latency {lat}")
        typer.echo(f"    source: {lv.citation('bandwidth_bytes_per_s')}")
    if h.interconnect:
        ic = h.interconnect
        link = format_rate(ic.link_bandwidth_bytes_per_s, "B/s") if ic.link_bandwidth_bytes_per_s else "?"
        typer.echo(f"  interconnect: {link} per direction, {ic.devices_per_node or '?'} per node")
    typer.echo(f"  content hash: {h.content_hash}")


@hardware_app.command("index")
def hardware_index(check: bool = typer.Option(False, "--check", help="exit 2 if it is out of date; write nothing")
                   ) -> None:
    """Rewrite hardware_specs/index.json, the index `hardware list` reads (after adding or editing a spec)."""
    from perfmodel.specs import index_file_text, index_path

    path = index_path()
    text = index_file_text()
    current = path.read_text() if path.is_file() else ""
    if check:
        if current != text:
            fail(f"{path} is out of date: perfmodel hardware index")
        return
    if current != text:
        path.write_text(text)
        typer.echo(f"wrote {path}")


@hardware_app.command("schema")
def hardware_schema() -> None:
    """Print the JSON Schema of a spec file."""
    from perfmodel.specs import schema_text

    typer.echo(schema_text(), nl=False)


@app.command("predict")
def predict_command(
    hardware_id: str = typer.Argument(..., help="hardware id (perfmodel hardware list)"),
    kind: str = typer.Argument(..., help="op kind, e.g. matmul, attention, rmsnorm"),
    fields: list[str] = typer.Argument(None, help="op fields as key=value, e.g. m=4096 dtype=bf16"),
    timing: str = typer.Option("kernel", help="kernel (profiler time) or host (wall clock around one op)"),
    warm_cache: bool = typer.Option(False, help="inputs already in the last-level cache"),
    as_json: bool = typer.Option(False, "--json", help="machine-readable output"),
    calibration: str = typer.Option(None, help="a stored calibration id, or 'latest' (perfmodel measure makes one)"),
) -> None:
    """Predict one op, e.g. `perfmodel predict nvidia-h100-sxm5-80gb matmul m=4096 n=4096 k=4096 dtype=bf16`."""
    try:
        typer.echo(predict_text(hardware_id, kind, fields, timing, warm_cache, as_json, calibration))
    except CliError as exc:
        fail(str(exc))


@app.command("search")
def search_command(
    hardware_id: str = typer.Argument(..., help="hardware id (perfmodel hardware list)"),
    kind: str = typer.Argument(..., help="op kind, e.g. matmul, conv2d"),
    fields: list[str] = typer.Argument(None, help="op fields as key=value, e.g. m=4096 dtype=bf16"),
    top_k: int = typer.Option(5, help="how many of the best schedules to list"),
    budget: int = typer.Option(None, help="evaluate at most this many candidates (seeded sample)"),
    seed: int = typer.Option(0, help="seed of the sample when a budget applies"),
    as_json: bool = typer.Option(False, "--json", help="machine-readable output"),
) -> None:
    """Search the schedule space: `perfmodel search nvidia-h100-sxm5-80gb matmul m=8192 n=8192 k=8192 dtype=bf16`."""
    from perfmodel.ops import OpError, make_op
    from perfmodel.search.engine import search
    from perfmodel.specs import SpecError

    op = {"kind": kind, **parse_assignments(fields or [])}
    try:
        result = search(hardware_id, make_op(op), top_k=top_k, budget=budget, seed=seed)
    except (OpError, SpecError, ValueError) as exc:
        fail(str(exc))
        return
    except KeyError as exc:
        fail(str(exc.args[0]))
        return
    if as_json:
        typer.echo(json.dumps(result.to_dict(), indent=2))
        return
    typer.echo(f"best: {result.explanation}")
    typer.echo(f"space {result.space_size} candidates: {result.evaluated} evaluated, {result.pruned} pruned, "
               f"rejected {result.rejected or 'none'}; {result.search_time_s * 1e3:.1f} ms")
    header = f"  {'tile MxNxK':<16}{'stages':>7}{'split':>6}{'group':>6}{'waves':>9}{'on chip':>10}{'GEMM time':>11}"
    for title, rows in (("top", result.top_k), ("Pareto front (time vs on-chip footprint)", result.pareto)):
        if rows:
            typer.echo(f"{title}:\n{header}")
        for r in rows:
            tile = f"{r['tile_m']:g}x{r['tile_n']:g}x{r['tile_k']:g}"
            typer.echo(f"  {tile:<16}{r['stages']:>7g}{r['split_k']:>6g}{r['raster_group']:>6g}{r['waves']:>9.2f}"
                       f"{format_bytes(r['footprint_bytes']):>10}{format_time_s(r['time_s']):>11}")
    for note in result.notes:
        typer.echo(f"note: {note}")


DEMO_OPS: list[dict[str, Any]] = [
    {"kind": "matmul", "m": 8192, "n": 8192, "k": 8192, "dtype": "bf16"},
    {"kind": "matmul", "m": 16, "n": 8192, "k": 8192, "dtype": "bf16"},
    {"kind": "attention", "batch": 4, "heads": 32, "kv_heads": 8, "seq_q": 4096, "seq_kv": 4096,
     "head_dim": 128, "causal": True, "dtype": "bf16"},
    {"kind": "rmsnorm", "shape": [16384, 8192], "dtype": "bf16"},
    {"kind": "allreduce", "bytes": 256e6, "devices": 8},
]
DEMO_HARDWARE = ["nvidia-a100-sxm4-80gb", "nvidia-h100-sxm5-80gb", "amd-mi300x", "google-tpu-v5p"]


@app.command("demo")
def demo() -> None:
    """A small table: five ops on four devices, to see the model at work."""
    from perfmodel.roofline import predict_many
    from perfmodel.specs import library

    known = set(library())
    devices = [h for h in DEMO_HARDWARE if h in known]
    labels = ["matmul 8192³", "matmul m=16 (decode)", "attention 4k causal GQA", "rmsnorm 16k×8k",
              "all-reduce 256 MB ×8"]
    typer.echo(f"perfmodel {__version__}: predicted time (bound)\n")
    typer.echo(f"{'op':<26}" + "".join(f"{d:>30}" for d in devices))
    batches = {d: predict_many(d, DEMO_OPS) for d in devices}
    for i, label in enumerate(labels):
        cells = [f"{format_time_s(batches[d][i].time_s)} ({batches[d][i].bound})" for d in devices]
        typer.echo(f"{label:<26}" + "".join(f"{c:>30}" for c in cells))
    typer.echo("\nTry: perfmodel predict nvidia-h100-sxm5-80gb matmul m=4096 n=4096 k=4096 dtype=bf16")


@app.command("serve")
def serve(
    host: str = typer.Option(None, help="default PERFMODEL_HOST or 127.0.0.1"),
    port: int = typer.Option(None, help="default PERFMODEL_PORT or 8000"),
    workers: int = typer.Option(1, help="uvicorn worker processes"),
) -> None:
    """Run the REST service and dashboard (SQLite under PERFMODEL_DATA_DIR unless PERFMODEL_DATABASE_URL)."""
    import uvicorn

    from api.settings import Settings

    settings = Settings()
    host = host or settings.host
    port = port or settings.port
    typer.echo(f"perfmodel {__version__}: http://{host}:{port}/  (API docs at /docs, "
               f"database {settings.resolved_database_url()})")
    from api.http_protocol import HTTP_PROTOCOL  # one socket write per small response

    uvicorn.run("api.main:create_app", factory=True, host=host, port=port, workers=workers, log_level="warning",
                http=HTTP_PROTOCOL)


@app.command("calibrate")
def calibrate_command(
    hardware_id: str = typer.Option(..., "--hardware", help="the device whose stored runs to fit"),
    trace: int = typer.Option(None, help="only the runs of this trace upload (perfmodel trace --store prints it)"),
    op_kind: str = typer.Option(None, "--op-kind", help="only runs of this op kind (matmul, conv2d, ...)"),
    source: str = typer.Option(None, help="only runs from this source (e.g. trace:pytorch_kineto)"),
    base: int = typer.Option(None, help="seed classes without runs from this calibration of a related device"),
    folds: int = typer.Option(5, min=2, max=20, help="k of the k-fold cross-validation"),
    notes: str = typer.Option(None, help="stored with the calibration"),
    as_json: bool = typer.Option(False, "--json", help="print the stored calibration's report as JSON"),
) -> None:
    """Fit a calibration on the stored runs of a device (as POST /api/v1/calibrations does) and store it as a new
    version, its latest: then `perfmodel predict ... --calibration latest`, `perfmodel trace ... --calibration
    latest`, or "calibration": "latest" in the API. The fit is a job (GET /api/v1/jobs lists it, DELETE cancels
    it), run in this process."""
    from perfmodel.calibration.stored import format_calibration_report
    from perfmodel.jobs.here import run_calibration_here
    from perfmodel.measure.command import StderrProgress

    refuse_if_read_only()
    store = open_store()
    progress = StderrProgress()  # on stderr: a bar with the stage on a terminal, a line per 10 % in a log
    try:
        hw = resolve_hardware(hardware_id)
    except (KeyError, ValueError) as exc:
        fail(str(exc.args[0]) if exc.args else str(exc))
        return
    run_filter = {k: v for k, v in (("trace_upload_id", trace), ("op_kind", op_kind), ("source", source)) if v}
    job = run_calibration_here(store, {"hardware": hw.id, "filter": run_filter, "base_calibration": base,
                                       "folds": folds, "notes": notes}, observer=progress)
    progress.end()
    if job.status != "succeeded" or job.result_id is None:
        fail(f"calibration job {job.id} {job.status}: {job.error}")
        return
    calibration_id = job.result_id
    row = store.get_calibration(calibration_id)
    if as_json:
        typer.echo(json.dumps({"id": calibration_id, "hardware": hw.id, "report": row.fit_report}, indent=1,
                              allow_nan=False, default=str))
        return
    typer.echo(format_calibration_report(row.fit_report))
    typer.echo(f"calibration {calibration_id} of {hw.id!r} stored; it is now the latest "
               f"(GET /api/v1/calibrations/{calibration_id})")


@app.command("measure")
def measure(
    out: Path = typer.Option(Path("var/measure"), help="folder for the spec YAML and the suite trace"),
    host_id: str = typer.Option("host", "--id", help="hardware id of this host's spec"),
    quick: bool = typer.Option(False, help="seconds instead of minutes: fewer sizes, repeats and suite ops"),
) -> None:
    """Measure this machine (ERT-style sweep, BLAS peaks), register it as a device, time the op suite under
    the PyTorch profiler, upload the trace and calibrate: fit on half the shapes, score on the rest."""
    from perfmodel import allocator

    allocator.hold("host measurement")  # torch timed under glibc's defaults, before the loop imports the model
    from perfmodel.measure.command import StderrProgress, measure_command
    from perfmodel.measure.loop import format_report, run_loop

    refuse_if_read_only()  # before minutes of measuring: its end registers the host and stores a calibration
    specs: list[dict[str, Any]] = []

    def on_trace(trace: Path) -> None:
        typer.echo(f"registering {host_id!r}, uploading the trace and calibrating ...", err=True)
        progress = StderrProgress()
        try:
            report = run_loop(open_store(), specs[-1], trace, progress)
        finally:
            progress.end()
        typer.echo(format_report(report))
        typer.echo(f"try: perfmodel predict {host_id} matmul m=1024 n=1024 k=1024 dtype=fp32 --calibration latest")

    measure_command(on_spec=specs.append, on_trace=on_trace)(out=out, host_id=host_id, quick=quick, suite=True)


BIG_TRACE_BYTES = 8 << 20  # trace files from this size up show stage progress on stderr


@app.command("trace")
def trace_command(
    path: Path = typer.Argument(..., help="a profiler trace: Kineto .json(.gz), Nsight Compute/Systems CSV or "
                                          "SQLite, rocprof CSV (the format is read from the content)"),
    hardware_id: str = typer.Option(..., "--hardware", help="the device it ran on (perfmodel hardware list)"),
    calibration: str = typer.Option(None, help="predict with a stored calibration id, or 'latest'"),
    top: int = typer.Option(None, help="how many ops, unmodelled kernels and alarms to list (text: 15; --json: all)"),
    store: bool = typer.Option(False, "--store", help="also store it as POST /api/v1/traces does (measured runs "
                                                     "in the service's database; the same file twice is one trace)"),
    as_json: bool = typer.Option(False, "--json", help="machine-readable output (every op; --top limits the lists)"),
    tag: list[str] = typer.Option([], "--tag", help="with --store: key=value on the upload and its runs, e.g. "
                                  "commit=3f2a9c1, environment=silicon|emulator|simulator|fpga, cuda=12.4"),
) -> None:
    """Read a profiler trace offline: per op kind and per op, measured vs predicted, the kernels no modelled
    op explains, roof alarms; e.g. `perfmodel trace step.pt.trace.json.gz --hardware nvidia-a100-sxm4-80gb`."""
    from perfmodel.store import StoreError
    from perfmodel.store.tags import parse_tags
    from perfmodel.traces import TraceError, match_runs, parse_trace
    from perfmodel.traces.report import format_trace_report, trace_report

    try:
        hw = resolve_hardware(hardware_id)
        cal, cal_id = stored_calibration(hw.id, calibration) if calibration else (None, None)
        tags = parse_tags(tag)
    except (KeyError, StoreError) as exc:
        fail(str(exc.args[0]) if exc.args else str(exc))
        return
    if tags and not store:
        fail("--tag is stored with the trace: add --store")
    if store:
        refuse_if_read_only()
    if not path.is_file():
        fail(f"{path}: {'not a file' if path.exists() else 'no such file'}")
    from perfmodel.stage_progress import StageProgress

    # a bar on stderr for files that take seconds (a 100k-kernel Kineto trace: ~40 MB, ~10 s)
    progress = StageProgress(("parse", "match", "report", "store")[: 4 if store else 3],
                             quiet=path.stat().st_size < BIG_TRACE_BYTES)
    try:
        progress.stage("parse")
        parsed = parse_trace(path, path.name)
        progress.stage("match")
        matched = match_runs(parsed)
        progress.stage("report")
        name = None if cal_id is None else f"{cal_id}{' (latest)' if calibration == 'latest' else ''}"
        report = trace_report(hw, parsed, matched, cal, name)
    except TraceError as exc:
        progress.close()
        fail(str(exc))
        return
    upload: dict[str, Any] | None = None
    if store:
        from perfmodel.traces.ingest import ingest_trace

        progress.stage("store")
        with path.open("rb") as stream:
            done = ingest_trace(open_store(), hw, stream, path.name, tags=tags, parsed_and_matched=(parsed, matched))
        upload = {"id": done.upload_id, "duplicate": done.duplicate}
    progress.end()
    if as_json:
        data = {**report.to_json(None if top is None else max(top, 1)), "upload": upload}
        typer.echo(json.dumps(data, indent=1, allow_nan=False))
        return
    typer.echo(format_trace_report(report, 15 if top is None else max(top, 1)))
    if upload is not None:
        state = "already stored as" if upload["duplicate"] else "stored as"
        typer.echo(f"{state} trace upload {upload['id']} (GET /api/v1/traces/{upload['id']})")


app.command("estimate")(estimate_command)


@app.command("compare", add_help_option=False,
             context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def compare_command(ctx: typer.Context) -> None:
    """Compare two traces (files or trace:ID) per kernel / op: the CI regression gate (see --help)."""
    from perfmodel.compare.cli import run

    run(list(ctx.args))
app.command("sweep")(sweep_command)
app.command("train-layouts")(train_layouts_command)


def main() -> None:
    try:
        app()
    except BrokenPipeError:
        sys.exit(0)
