"""Whole-model estimate speed and sweep throughput (printed figures, not asserts).

    python benchmarks/model_speed.py [--variants 200]

0. The largest bundled config (by parameters), and a check that every bundled model's copied layers are
   fused once per distinct layer context (dense, MoE, GPT-2 style; prefill, decode, train).
1. Llama-3-70B (TP=8) and Llama-3.1-405B (TP=8, PP=2) prefill (8 x 2048 tokens) and decode (batch 8,
   KV 4096) on H100s with the full GEMM schedule search per distinct op: build + fuse + cost + schedule
   + memory (CPU ms, best of 5), warm (a repeat: GEMM choices, fused windows, work and roles kept from the
   earlier calls) and cold (all of that cleared before each), then to_json; copied layers against the
   layer-by-layer build; then the largest model's estimate stage by stage.
2. A sweep of hardware variants (DRAM bandwidth, matrix peak, SMEM, clock) x one workload:
   serial in this process, 2 local processes, and a 2-worker Dask LocalCluster on loopback. Parallel efficiency
   in CPU, since a shared machine's wall clock says little: serial CPU over the Dask run's (workers, client and
   scheduler); the bound on a core per worker (serial CPU / 2 x the busiest worker's, which shows an idle
   worker); and the same bound with the sweep's work measured in the Dask run itself (its task threads' CPU,
   ``sweep_exec.task_cpu_s``), where the load of the moment cancels and only Dask's own CPU and imbalance count.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from perfmodel.graph import LlmConfig, LlmWorkload, Parallelism, build_llm, bundled, bundled_names, estimate
from perfmodel.graph.estimate import _largest_roles, clear_kept, compile_graph, predict_compiled
from perfmodel.graph.fusion import RULES, fuse, fuse_slots
from perfmodel.graph.memory import memory
from perfmodel.graph.repeat import fuse_repeated
from perfmodel.graph.schedule import schedule
from perfmodel.graph.sweep import SweepSpec, run_sweep
from perfmodel.search import gemm_kernel

H100 = "nvidia-h100-sxm5-80gb"


def _estimate_cpu_s(cfg: LlmConfig, workload: LlmWorkload, par: Parallelism, copy_layers: bool,
                    repeats: int, cold: bool = False) -> tuple[float, float, int, int, float]:
    """Best-of CPU seconds of build + fuse + cost + schedule + memory, and of ``to_json``; nodes, ops, step.
    ``cold``: what estimates keep across calls (GEMM choices, fused windows, work, roles) cleared before each."""
    best, best_json = float("inf"), float("inf")
    for _ in range(repeats):
        if cold:
            clear_kept()
        t0 = time.process_time()
        graph = build_llm(cfg, workload, par, copy_layers=copy_layers)
        est = estimate(graph, H100, space="full")
        t1 = time.process_time()
        est.to_json()
        best, best_json = min(best, t1 - t0), min(best_json, time.process_time() - t1)
    return best, best_json, len(graph), len(est.batch), est.step_time_s


def time_estimates(repeats: int = 5) -> None:
    """Llama-3-70B (TP=8) and the largest bundled model, Llama-3.1-405B (TP=8, PP=2: 16 H100s), with copied
    layers (one layer built and fused, then copied) against the layer-by-layer build in the same run."""
    print(f"numba kernel loaded (long-running process): {gemm_kernel.load()}")
    cases = [("llama-3-70b", Parallelism(tp=8, devices_per_node=8)),
             ("llama-3.1-405b", Parallelism(tp=8, pp=2, devices_per_node=8))]
    for name, par in cases:
        cfg = bundled(name)
        for phase in ("prefill", "decode"):
            workload = LlmWorkload(phase=phase, batch=8, prompt_tokens=2048, kv_len=4096)
            _estimate_cpu_s(cfg, workload, par, True, 1)  # warm caches (hardware, search tables)
            each, _, _, _, step_each = _estimate_cpu_s(cfg, workload, par, False, repeats)
            cold, _, _, _, step_cold = _estimate_cpu_s(cfg, workload, par, True, repeats, cold=True)
            copied, copied_json, nodes, ops, step = _estimate_cpu_s(cfg, workload, par, True, repeats)
            assert step == step_each == step_cold
            print(f"{name} {phase:7} {par.tp}x{par.pp} H100, full search, {nodes} nodes, {ops} distinct ops: "
                  f"estimate {copied * 1e3:.1f} ms CPU (cold {cold * 1e3:.1f} ms: nothing kept from earlier calls; "
                  f"layer by layer {each * 1e3:.1f} ms, ratio {each / copied:.2f}); to_json "
                  f"{copied_json * 1e3:.1f} ms; step {step * 1e3:.2f} ms")


def largest_bundled() -> tuple[str, int]:
    """The bundled config with the most parameters (one device holding the whole model)."""
    sizes = {name: build_llm(bundled(name), LlmWorkload(), Parallelism()).params for name in bundled_names()}
    name = max(sizes, key=lambda n: sizes[n])
    return name, sizes[name]


def repeat_path_used() -> None:
    """Every bundled model (dense, MoE, GPT-2 style), prefill/decode/train: the copied-layer plan applies
    (one window fused per distinct layer context, then copied), not the node-by-node fallback."""
    par = Parallelism(tp=2, pp=2, devices_per_node=8)
    misses = []
    for name in bundled_names():
        for phase in ("prefill", "decode", "train"):
            graph = build_llm(bundled(name), LlmWorkload(phase=phase, batch=4, kv_len=1024), par)
            plan = graph.repeat
            if plan is None or fuse_repeated(graph, plan, lambda window: fuse_slots(window, dict(RULES))) is None:
                misses.append(f"{name} {phase}")
    print(f"copied layers fused once per context for every bundled model x phase: {not misses} {misses or ''}")


def stage_breakdown(name: str, par: Parallelism, repeats: int = 10) -> None:
    """Best-of CPU ms of each stage of ``estimate`` (build, fuse, compile, cost, schedule, memory, roles)."""
    cfg, hw = bundled(name), H100
    from perfmodel.roofline import resolve_hardware

    device = resolve_hardware(hw)
    for phase in ("prefill", "decode"):
        workload = LlmWorkload(phase=phase, batch=8, prompt_tokens=2048, kv_len=4096)
        best: dict[str, float] = {}
        for _ in range(repeats):
            t = [time.process_time()]
            graph = build_llm(cfg, workload, par)
            t.append(time.process_time())
            fuse(graph)
            t.append(time.process_time())
            compiled = compile_graph(graph)
            t.append(time.process_time())
            batch = predict_compiled(compiled, device, "full")
            t.append(time.process_time())
            schedule(graph, compiled.node_times(batch), par.microbatches)
            t.append(time.process_time())
            memory(graph, device)
            t.append(time.process_time())
            _largest_roles(compiled.ops)
            t.append(time.process_time())
            for k, stage in enumerate(("build", "fuse", "compile", "cost", "schedule", "memory", "roles")):
                best[stage] = min(best.get(stage, float("inf")), t[k + 1] - t[k])
        parts = ", ".join(f"{k} {v * 1e3:.2f}" for k, v in best.items())
        print(f"{name} {phase} stages, best of {repeats} (CPU ms): {parts}; sum {sum(best.values()) * 1e3:.1f}")


def sweep_spec(variants: int) -> SweepSpec:
    return SweepSpec.from_json({
        "base": H100, "mode": "random", "samples": variants, "seed": 0,
        "axes": {"levels.dram.bandwidth_bytes_per_s": ["x0.5", "x0.75", "x1", "x1.5", "x2", "x3"],
                 "engines.*.peak_flops_per_s": ["x0.5", "x1", "x1.5", "x2", "x4"],
                 "levels.SMEM.capacity_bytes": ["x0.5", "x1", "x2"],
                 "clock_hz": ["x0.8", "x1", "x1.2"], "devices": [4, 8]},
        "workloads": [{"model": "llama-3-70b", "phase": "decode", "batch": 8, "kv_len": 4096}]})


def time_sweeps(variants: int, repeats: int = 5, profile_workers: bool = False, dask_defaults: bool = False) -> None:
    """Serial, 2 local processes and a 2-worker Dask LocalCluster; then ``repeats`` alternating serial / warm
    Dask runs (medians: on a shared 2-core machine one pair says little), in wall clock and in CPU."""
    import statistics

    import dask

    gemm_kernel.load()  # as in the workers
    spec = sweep_spec(variants)
    start = time.process_time()
    serial = run_sweep(spec)
    serial_cpu = time.process_time() - start
    print(f"sweep {variants} variants x 1 workload, serial (1 process): {serial['elapsed_s']:.2f} s, "
          f"{serial['evaluations_per_s']:.0f} variant-workloads/s")
    local = run_sweep(spec, workers=2)
    print(f"sweep, 2 local processes: {local['elapsed_s']:.2f} s, {local['evaluations_per_s']:.0f}/s")
    from distributed import Client, LocalCluster

    from perfmodel.graph.sweep_exec import SWEEP_CLUSTER_CONFIG, task_cpu_s

    t0 = time.perf_counter()
    # a cluster kept for sweeps: no stack sampler, the periodic loops slowed (``--dask-defaults``: Dask's own)
    config = {} if dask_defaults else dict(SWEEP_CLUSTER_CONFIG)
    config["distributed.worker.profile.enabled"] = profile_workers
    with dask.config.set(config), \
            LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                         dashboard_address=None) as cluster, Client(cluster) as client:  # type: ignore[no-untyped-call]
        started = time.perf_counter() - t0
        dask_rows = run_sweep(spec, client=client)
        walls, cpus, bounds, same_run, tasks, overheads, warm = [], [], [], [], [], [], dask_rows
        for _ in range(repeats):
            start = time.process_time()
            serial = run_sweep(spec)
            serial_cpu = time.process_time() - start
            before, task_before = client.run(time.process_time), client.run(task_cpu_s)
            client_cpu = time.process_time()
            warm = run_sweep(spec, client=client)
            client_cpu = time.process_time() - client_cpu
            after, task_after = client.run(time.process_time), client.run(task_cpu_s)
            per_worker = [after[k] - before[k] for k in after]
            workers_cpu, task_cpu = sum(per_worker), sum(task_after[k] - task_before[k] for k in task_after)
            total = workers_cpu + client_cpu
            walls.append(serial["elapsed_s"] / (2 * warm["elapsed_s"]))
            cpus.append(serial_cpu / total)
            # with a core per worker, the run takes at least the busiest worker's CPU and half of all the CPU
            bounds.append(serial_cpu / (2 * max(max(per_worker), total / 2)))
            # the same with the sweep's work measured in this run (its task threads), not in the serial run:
            # both sides from one interval, so the load of the moment cancels; what is left is Dask's own CPU
            # and the imbalance between the workers
            same_run.append(task_cpu / (2 * max(max(per_worker), total / 2)))
            tasks.append(task_cpu / serial_cpu)  # the same work's CPU in two parallel tasks against one process
            overheads.append((total - task_cpu) / total)  # Dask's share: scheduler, client, worker threads
    med = statistics.median
    print(f"sweep, Dask LocalCluster 2 workers (loopback): {dask_rows['elapsed_s']:.2f} s, "
          f"{dask_rows['evaluations_per_s']:.0f}/s with cold workers (imports, graph build); warm "
          f"{warm['elapsed_s']:.2f} s, {warm['evaluations_per_s']:.0f}/s (cluster start {started:.1f} s not included)")
    print(f"parallel efficiency, {repeats} alternating serial / warm Dask runs, median (best): CPU (serial / Dask "
          f"workers + client and scheduler) {med(cpus):.0%} ({max(cpus):.0%}); on a core per worker (serial / 2 x "
          f"max(busiest worker, half the total)) {med(bounds):.0%} ({max(bounds):.0%}); wall {med(walls):.0%} "
          f"({max(walls):.0%}: a loaded machine's wall clock says little)")
    print(f"  on a core per worker, the work measured in the same run (task threads / 2 x max(busiest worker, half "
          f"the total)): median {med(same_run):.0%} (worst {min(same_run):.0%}, best {max(same_run):.0%})")
    print(f"  where the CPU goes: task threads / serial CPU {med(tasks):.2f} (the same work run as two parallel "
          f"tasks: > 1 is the machine's contention, not Dask), Dask's own share of the run's CPU {med(overheads):.0%};"
          f" last pair: serial {serial_cpu:.3f} s, task threads {task_cpu:.3f} s, worker processes "
          f"{' + '.join(f'{c:.3f}' for c in per_worker)} s, client and scheduler {client_cpu:.3f} s")
    same = [r["time_s"] for r in dask_rows["rows"]] == [r["time_s"] for r in serial["rows"]]
    same = same and [r["time_s"] for r in warm["rows"]] == [r["time_s"] for r in serial["rows"]]
    print(f"Dask results identical to serial: {same}; Pareto front: "
          f"{len(dask_rows['pareto'][dask_rows['rows'][0]['label']])} variants")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--variants", type=int, default=200)
    parser.add_argument("--sweeps-only", action="store_true", help="only the sweeps")
    parser.add_argument("--profile-workers", action="store_true", help="keep the Dask workers' stack sampler on")
    parser.add_argument("--no-sweeps", action="store_true", help="only the whole-model estimates")
    parser.add_argument("--dask-defaults", action="store_true",
                        help="start the Dask cluster with Dask's default intervals, not SWEEP_CLUSTER_CONFIG's")
    args = parser.parse_args()
    if args.sweeps_only:
        time_sweeps(args.variants, profile_workers=args.profile_workers, dask_defaults=args.dask_defaults)
        return
    name, params = largest_bundled()
    print(f"largest bundled model: {name} ({params / 1e9:.0f} B parameters)")
    repeat_path_used()
    time_estimates()
    stage_breakdown(name, Parallelism(tp=8, pp=2, devices_per_node=8))
    if not args.no_sweeps:
        time_sweeps(args.variants, profile_workers=args.profile_workers, dask_defaults=args.dask_defaults)


if __name__ == "__main__":
    main()
