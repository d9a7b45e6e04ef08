"""Nsight Compute for the profile step: find ncu, build the command line that wraps a
worker, read the CSV it writes, and sum it up per forward.

The sandbox starts the ncu pass's worker under `ncu_command` (limited to the NVTX range
the worker pushes around the candidate's forwards); `parse_ncu_csv` reads the report
and `ncu_summary` gives the duration-weighted figures tools/perf/summary.py uses.
Runs no kernel and decides nothing about a candidate; without ncu the summary works
from the other sources (tools/perf/profiler.py).
"""
from __future__ import annotations

import csv
import glob
import io
import re
import shutil

NCU_SECTIONS = ("SpeedOfLight", "MemoryWorkloadAnalysis", "Occupancy", "LaunchStats")
# Counted on top of the sections: DRAM bytes for the roofline, and executed fp
# instructions (FMA = 2 FLOPs) for FLOPs that torch's counter does not see.
NCU_METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum", "gpu__time_duration.sum",
               *(f"sm__sass_thread_inst_executed_op_{op}_pred_on.sum"
                 for op in ("fadd", "fmul", "ffma", "hadd", "hmul", "hfma", "dadd", "dmul", "dfma")))


def find_ncu() -> str | None:
    """Path of Nsight Compute's CLI, or None (the summary then works without it)."""
    found = shutil.which("ncu")
    if found:
        return found
    for pattern in ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/*/ncu",
                    "/usr/local/cuda-*/bin/ncu"):
        hits = sorted(glob.glob(pattern))
        if hits:
            return hits[-1]
    return None


NVTX_RANGE = "krefine.candidate"   # the worker pushes this around the profiled forward


def ncu_command(python_cmd: list[str], *, nvtx_range: str = NVTX_RANGE,
                metrics_sections: tuple[str, ...] = NCU_SECTIONS,
                metrics: tuple[str, ...] = NCU_METRICS, log_file: str | None = None,
                ncu: str | None = None) -> list[str]:
    """`ncu ... python_cmd`: profile only kernels launched inside the NVTX push/pop range
    `nvtx_range`, CSV raw page in base units (ns, bytes) so parse_ncu_csv needs no
    unit guessing. With log_file the report goes there instead of the worker's stdout."""
    cmd = [ncu or find_ncu() or "ncu",
           "--clock-control", "none",        # measure the card as it runs, never lock clocks
           "--target-processes", "all",      # the worker may be a child of the launcher
           "--nvtx", "--nvtx-include", nvtx_include(nvtx_range),
           ]
    for s in metrics_sections:
        cmd += ["--section", s]
    if metrics:
        cmd += ["--metrics", ",".join(metrics)]
    cmd += ["--csv", "--page", "raw", "--print-units", "base"]
    if log_file:
        cmd += ["--log-file", str(log_file)]
    return cmd + list(python_cmd)


def nvtx_include(nvtx_range: str) -> str:
    """The --nvtx-include expression for one push/pop range (the trailing "/" says push/pop).

    ncu reads "/" as range nesting, so a range whose own name holds a "/" cannot be
    selected: neither "krefine/candidate/" nor "regex:krefine/candidate/" selects
    krefine/candidate, "krefine.candidate/" selects krefine.candidate. Such a name is our
    own bug, so it raises rather than profiling nothing.
    """
    if "/" in nvtx_range:
        raise ValueError(f"NVTX range {nvtx_range!r}: ncu cannot select a range whose name "
                         "contains '/'; use e.g. 'krefine.candidate'")
    return f"{nvtx_range}/"


# ncu metric -> our key (values in base units: --print-units base; _number scales others)
_NCU_FIELDS = {
    "gpu__time_duration.sum": "duration_ns",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_pct",
    "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed": "dram_pct",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_pct",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": "memory_pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved_occupancy_pct",
    "sm__maximum_warps_per_active_cycle_pct": "theoretical_occupancy_pct",
    "launch__registers_per_thread": "n_regs",
    "launch__block_size": "block_threads",
    "launch__grid_size": "grid_blocks",
    "launch__waves_per_multiprocessor": "waves",
    "launch__shared_mem_per_block_static": "shared_static",
    "launch__shared_mem_per_block_dynamic": "shared_dynamic",
    "dram__bytes_read.sum": "dram_bytes_read",
    "dram__bytes_write.sum": "dram_bytes_write",
    "device__attribute_multiprocessor_count": "sm_count",
    "launch__occupancy_limit_registers": "limit_registers",
    "launch__occupancy_limit_shared_mem": "limit_shared_memory",
    "launch__occupancy_limit_warps": "limit_threads",
    "launch__occupancy_limit_blocks": "limit_blocks",
}
_UNIT_SCALE = {"nsecond": 1, "ns": 1, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6,
               "second": 1e9, "s": 1e9, "byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9,
               "KB": 1e3, "MB": 1e6, "GB": 1e9, "KiB": 1024, "MiB": 2**20, "GiB": 2**30}
_FLOP_OPS = {"fadd": 1, "fmul": 1, "ffma": 2, "hadd": 1, "hmul": 1, "hfma": 2,
             "dadd": 1, "dmul": 1, "dfma": 2}


def _number(text: str, unit: str = "") -> float | None:
    t = (text or "").strip().replace(",", "")
    try:
        v = float(t)
    except ValueError:
        return None
    return v * _UNIT_SCALE.get(unit.strip(), 1)


def parse_ncu_csv(text: str) -> list[dict]:
    """One dict per profiled kernel launch from `ncu --csv --page raw` output.

    Lines before the header ("==PROF==" notes, the program's own output) are skipped.
    Keys: name, duration_us, dram_pct, sm_pct, memory_pct, achieved_occupancy_pct,
    theoretical_occupancy_pct, occupancy_limit, n_regs, block_threads, grid_blocks, waves,
    shared, dram_bytes_read, dram_bytes_write, flops (when the sass counters are
    present), tensor_pct (tensor pipe busy %, when a section reports it); a figure ncu
    did not give is absent.
    """
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines)
                  if ln.startswith('"') and '"Kernel Name"' in ln), None)
    if start is None:
        return []
    body = [ln for ln in lines[start:] if ln.startswith('"')]
    table = list(csv.reader(io.StringIO("\n".join(body))))
    header, rest = table[0], table[1:]
    units = [""] * len(header)
    if rest and not any(_number(c) is not None for c in rest[0]):
        units, rest = rest[0], rest[1:]     # second line: units of each metric column
    out = []
    for values in rest:
        if len(values) != len(header):
            continue
        cell = dict(zip(header, values))
        unit = dict(zip(header, units))
        row: dict = {"name": cell.get("Kernel Name", "?"), "id": _number(cell.get("ID", ""))}
        flops, have_flops, tensor = 0.0, False, []
        for metric, text in cell.items():
            key = _NCU_FIELDS.get(metric)
            if key is not None:
                v = _number(text, unit.get(metric, ""))
                if v is not None:
                    row[key] = v
            elif m := re.fullmatch(r"sm__sass_thread_inst_executed_op_(\w+?)_pred_on\.sum", metric):
                v = _number(text)
                if m.group(1) in _FLOP_OPS and v is not None:
                    flops += _FLOP_OPS[m.group(1)] * v
                    have_flops = True
            elif metric.startswith("sm__pipe_tensor") and ".avg.pct_of_peak_sustained" in metric:
                # Hopper: sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed
                v = _number(text)
                if v is not None:
                    tensor.append(v)
        if "duration_ns" in row:
            row["duration_us"] = row.pop("duration_ns") / 1e3
        shared = [row.pop(k) for k in ("shared_static", "shared_dynamic") if k in row]
        if shared:
            row["shared"] = int(sum(shared))
        limits = {k.removeprefix("limit_").replace("_", " "): row.pop(k)
                  for k in [k for k in row if k.startswith("limit_")]}
        if limits:   # blocks per SM each resource allows; the smallest is the limiter
            row["occupancy_limit"] = min(limits, key=lambda k: limits[k])
        if have_flops:
            row["flops"] = flops
        if tensor:
            row["tensor_pct"] = max(tensor)
        out.append(row)
    return out


def ncu_summary(rows: list[dict]) -> dict | None:
    """Duration-weighted DRAM / SM / tensor percentages over every kernel of the range,
    plus the hottest kernel's launch figures; None when ncu gave nothing."""
    timed = [r for r in rows if r.get("duration_us")]
    if not timed:
        return None
    total = sum(r["duration_us"] for r in timed)
    def weighted(key):
        have = [r for r in timed if key in r]
        if not have:
            return None
        return sum(r[key] * r["duration_us"] for r in have) / sum(r["duration_us"] for r in have)
    hot = max(timed, key=lambda r: r["duration_us"])
    dram = [r["dram_bytes_read"] + r.get("dram_bytes_write", 0)
            for r in rows if "dram_bytes_read" in r]
    return {"kernels": len(rows), "duration_us": total, "dram_pct": weighted("dram_pct"),
            "sm_pct": weighted("sm_pct"), "tensor_pct": weighted("tensor_pct"),
            "achieved_occupancy_pct": hot.get("achieved_occupancy_pct"),
            "waves": hot.get("waves"), "hot": hot.get("name"),
            "dram_bytes": sum(dram) if dram else None}
