"""Nsight Systems files written in NVIDIA's documented layouts (no public real export exists).

CSV column names: Nsight Systems Post-Collection Analysis Guide, "Statistical Reports Shipped With
Nsight Systems" (https://docs.nvidia.com/nsight-systems/AnalysisGuide/index.html): cuda_gpu_kern_sum
and cuda_gpu_trace (2023+); gpukernsum and gputrace are the pre-2023 names of the same reports.
SQLite: "SQLite Export Schema Reference" (https://docs.nvidia.com/nsight-systems/2021.5/nsys-exporter/
exported_data.html): StringIds(id, value); CUPTI_ACTIVITY_KIND_KERNEL with start/end in ns, deviceId,
contextId, streamId, correlationId, grid/block dims, and names as StringIds ids (demangledName,
shortName; mangledName in newer versions); CUPTI_ACTIVITY_KIND_MEMCPY/MEMSET with bytes and copyKind.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from trace_builders import csv_text

KERNELS = [  # (name, start ns, duration ns, grid, block)
    ("void gemm_kernel<float>(float*, float const*)", 1_000, 2_500, (64, 2, 1), (256, 1, 1)),
    ("<img src=x onerror=alert(1)>", 5_000, 1_200, (1, 1, 1), (32, 1, 1)),
    ("void gemm_kernel<float>(float*, float const*)", 9_000, 2_700, (64, 2, 1), (256, 1, 1)),
]

KERN_SUM_HEADER = ["Time (%)", "Total Time (ns)", "Instances", "Avg (ns)", "Med (ns)", "Min (ns)", "Max (ns)",
                   "StdDev (ns)", "Name"]
GPUKERNSUM_HEADER = ["Time(%)", "Total Time (ns)", "Instances", "Average", "Minimum", "Maximum", "StdDev", "Name"]
GPU_TRACE_HEADER = ["Start (ns)", "Duration (ns)", "CorrId", "GrdX", "GrdY", "GrdZ", "BlkX", "BlkY", "BlkZ",
                    "Reg/Trd", "StcSMem (MB)", "DymSMem (MB)", "Bytes (MB)", "Throughput (MBps)", "SrcMemKd",
                    "DstMemKd", "Device", "Ctx", "Strm", "Name"]
GPUTRACE_HEADER = ["Start (ns)", "Duration (ns)", "CorrId", "GrdX", "GrdY", "GrdZ", "BlkX", "BlkY", "BlkZ",
                   "Reg/Trd", "StcSMem (MB)", "DymSMem (MB)", "Bytes (MB)", "Throughput (MBps)", "SrcMemKd",
                   "DstMemKd", "Device", "Context", "Stream", "Name"]


def kern_sum(old: bool = False) -> bytes:
    totals: dict[str, list[int]] = {}
    for name, _, duration, _, _ in KERNELS:
        totals.setdefault(name, []).append(duration)
    grand = sum(sum(v) for v in totals.values())
    rows = []
    for name, values in totals.items():
        total = sum(values)
        stats = [total / len(values), min(values), max(values), 0.0]
        rows.append([f"{100 * total / grand:.1f}", total, len(values), *(stats if old else [stats[0], stats[0],
                                                                                         *stats[1:]]), name])
    header = GPUKERNSUM_HEADER if old else KERN_SUM_HEADER
    preamble = "" if old else "\n ** CUDA GPU Kernel Summary (cuda_gpu_kern_sum):\n\n"
    return csv_text(header, rows, preamble)


def gpu_trace(old: bool = False, unit: str = "ns") -> bytes:
    scale = {"ns": 1.0, "us": 1e-3}[unit]
    header = [h.replace("(ns)", f"({unit})") for h in (GPUTRACE_HEADER if old else GPU_TRACE_HEADER)]
    rows = []
    for corr, (name, start, duration, grid, block) in enumerate(KERNELS, start=100):
        rows.append([start * scale, duration * scale, corr, *grid, *block, 32, 0.0, 0.0, "", "", "", "",
                     "NVIDIA H100 80GB HBM3 (0)", 1, 7, name])
    rows.append([20_000 * scale, 800 * scale, 200, "", "", "", "", "", "", "", "", "", 1.0, 1250.0, "Pageable",
                 "Device", "NVIDIA H100 80GB HBM3 (0)", 1, 7, "[CUDA memcpy Host-to-Device]"])
    return csv_text(header, rows)


def sqlite_export(path: Path, name_columns: tuple[str, ...] = ("demangledName", "shortName", "mangledName")) -> Path:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
    names = ", ".join(f"{c} INTEGER NOT NULL" for c in name_columns)
    db.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, "
               "deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, "
               "correlationId INTEGER, globalPid INTEGER, " + names + ", registersPerThread INTEGER NOT NULL, "
               "gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL, "
               "blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL, staticSharedMemory INTEGER NOT NULL, "
               "dynamicSharedMemory INTEGER NOT NULL)")
    db.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL, "
               "deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, "
               "correlationId INTEGER, globalPid INTEGER, bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL, "
               "srcKind INTEGER, dstKind INTEGER)")
    string_id = 0
    for corr, (name, start, duration, grid, block) in enumerate(KERNELS, start=100):
        ids = []
        texts = {"demangledName": name, "shortName": name.split("(")[0].split(" ")[-1], "mangledName": "_Z" + name[:10]}
        for text in (texts[c] for c in name_columns):
            string_id += 1
            db.execute("INSERT INTO StringIds VALUES (?, ?)", (string_id, text))
            ids.append(string_id)
        db.execute(f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES ({', '.join('?' * (16 + len(name_columns)))})",
                   (start, start + duration, 0, 1, 7, corr, 1, *ids, 32, *grid, *block, 0, 0))
    db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (20000, 20800, 0, 1, 7, 200, 1, 1000000, 1, 0, 1)")
    db.commit()
    db.close()
    return path
