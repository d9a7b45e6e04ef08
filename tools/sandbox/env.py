"""The environment of a process the judge starts: a worker, a fork server, a fresh
process replaying a problem's step (tools/blame.py).

`worker_env` keeps a few variables the toolchain needs and drops everything else (keys,
user paths), points HOME, TMPDIR and the Triton cache into the process's own temp dir,
and shows it only the device it is for. Starts nothing (tools/sandbox/isolation.py does).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

# environment variables a worker may inherit (everything else is dropped)
_KEEP_ENV = ("PATH", "LD_LIBRARY_PATH", "LANG", "LC_ALL", "CUDA_HOME", "CUDA_PATH",
             "TRITON_PTXAS_PATH", "TRITON_LIBCUDA_PATH", "TRITON_CUDART_PATH")
_KEEP_PREFIXES = ("NCCL_", "TORCH_SYMM_MEM_", "NVSHMEM_")  # multicast-off settings on shared hosts


def worker_env(workdir: Path, device: str, gpu_index: int) -> dict[str, str]:
    """The scrubbed environment of a process for `device` ("cpu", "cuda" or "compile";
    on cuda it sees GPU `gpu_index` alone) whose temp dir is `workdir`."""
    env = {k: v for k, v in os.environ.items()
           if k in _KEEP_ENV or k.startswith(_KEEP_PREFIXES)}
    env.update(
        HOME=str(workdir),                                   # ~/.triton, ~/.nv land in the temp dir
        TMPDIR=str(workdir / "tmp"),
        TRITON_CACHE_DIR=str(workdir / "triton-cache"),      # no kernel cache shared between candidates
        PYTHONPATH=os.pathsep.join(p for p in sys.path if p and os.path.isdir(p)),
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONUNBUFFERED="1",
        PYTHONHASHSEED="0",
        # floating-point contraction (a*b+c as one FMA) on, as every Triton up to 3.9 defaults;
        # Triton 3.10 turns it off by default: pinned, a verdict's numerics do not move with it
        TRITON_DEFAULT_FP_FUSION="1",
    )
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
        env["CUDA_VISIBLE_DEVICES"] = ""
    elif device == "compile":   # compiles for a GPU target, runs nothing
        env["CUDA_VISIBLE_DEVICES"] = ""
    else:
        # gpu_index counts the GPUs the judge sees, which an outer CUDA_VISIBLE_DEVICES may narrow
        visible = [v for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
        env["CUDA_VISIBLE_DEVICES"] = visible[gpu_index] if gpu_index < len(visible) else str(gpu_index)
    return env
