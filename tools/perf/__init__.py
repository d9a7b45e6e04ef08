"""The perf room: how fast a correct candidate is, and why.

timer.py is the one timer and speedup.py the speedup with its interval; gpuinfo.py reads
the GPU's state (NVML) and health; profiles.py loads the GPU-profile TOML files (and
measures ceilings of an unknown GPU). The profile step collects with profiler.py
(torch.profiler breakdown and compiled-kernel resources, in the worker) and ncu.py
(Nsight Compute), and the judge reads the figures with roofline.py, bottleneck.py and
summary.py. Nothing here decides a verdict (tools/judge/ does).

This file only re-exports; modules under tools/ import the concrete submodules. The
`roofline` function is not re-exported: the name is its module's.
"""
from tools.perf.bottleneck import classify, describe
from tools.perf.gpuinfo import cuda_healthy, gpu_state
from tools.perf.ncu import find_ncu, ncu_command, parse_ncu_csv
from tools.perf.profiler import kernel_breakdown, kernel_resources, profile_forward, ptxas_resources, time_shares
from tools.perf.profiles import GpuProfile, gpu_profile, load_profiles, profile_for
from tools.perf.roofline import problem_cost, refine_cost
from tools.perf.speedup import Decision, SpeedupEstimate, clears, decide, estimate_speedup
from tools.perf.summary import summarize, summarize_verdict
from tools.perf.timer import CaptureUnsupported, nvtx_range, time_cuda, time_cuda_batched, time_cuda_graph, time_host

__all__ = [
    "CaptureUnsupported", "Decision", "GpuProfile", "SpeedupEstimate", "classify", "clears", "cuda_healthy",
    "decide", "describe", "estimate_speedup", "find_ncu", "gpu_profile", "gpu_state", "kernel_breakdown",
    "kernel_resources", "load_profiles", "ncu_command", "nvtx_range", "parse_ncu_csv", "problem_cost",
    "profile_for", "profile_forward", "ptxas_resources", "refine_cost", "summarize", "summarize_verdict",
    "time_cuda", "time_cuda_batched", "time_cuda_graph", "time_host", "time_shares",
]
