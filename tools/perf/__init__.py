"""The perf room: how fast a correct candidate is, and why.

timer.py is the one timer and speedup.py the speedup with its interval; gpuinfo.py reads
the GPU's state (NVML) and health; profiles.py loads the GPU-profile TOML files (and
measures ceilings of an unknown GPU). The profile step collects with profiler.py
(torch.profiler breakdown and compiled-kernel resources, in the worker) and ncu.py
(Nsight Compute), and the judge reads the figures with roofline.py, bottleneck.py and
summary.py. Nothing here decides a verdict (tools/judge/ does).

This file only re-exports, lazily; modules under tools/ import the concrete submodules. The
`roofline` function is not re-exported: the name is its module's.
"""
from tools.lazy import reexport

_EXPORTS = {
    "CaptureUnsupported": "tools.perf.timer",
    "Decision": "tools.perf.speedup",
    "GpuProfile": "tools.perf.profiles",
    "SpeedupEstimate": "tools.perf.speedup",
    "classify": "tools.perf.bottleneck",
    "clears": "tools.perf.speedup",
    "cuda_healthy": "tools.perf.gpuinfo",
    "decide": "tools.perf.speedup",
    "describe": "tools.perf.bottleneck",
    "estimate_speedup": "tools.perf.speedup",
    "find_ncu": "tools.perf.ncu",
    "gpu_profile": "tools.perf.profiles",
    "gpu_state": "tools.perf.gpuinfo",
    "kernel_breakdown": "tools.perf.profiler",
    "kernel_resources": "tools.perf.profiler",
    "load_profiles": "tools.perf.profiles",
    "ncu_command": "tools.perf.ncu",
    "nvtx_range": "tools.perf.timer",
    "parse_ncu_csv": "tools.perf.ncu",
    "problem_cost": "tools.perf.roofline",
    "profile_for": "tools.perf.profiles",
    "profile_forward": "tools.perf.profiler",
    "ptxas_resources": "tools.perf.profiler",
    "refine_cost": "tools.perf.roofline",
    "summarize": "tools.perf.summary",
    "summarize_verdict": "tools.perf.summary",
    "time_cuda": "tools.perf.timer",
    "time_cuda_batched": "tools.perf.timer",
    "time_cuda_graph": "tools.perf.timer",
    "time_host": "tools.perf.timer",
    "time_shares": "tools.perf.profiler",
}
__all__ = sorted(_EXPORTS)
__getattr__ = reexport(__name__, _EXPORTS, globals())
