"""Whether the judge's GPU is usable, and whose fault a failed check is.

The check itself (tools/perf/gpuinfo.py `cuda_healthy`: a tiny kernel, a device-wide
wait) holds the capture guard, so no CUDA-graph capture of this process can meet it.
Still, a check that fails because a capture was underway says nothing about the GPU:
some capture outside the guard met it (torch's own, a problem's forward). It is run
once more; a second such failure is the judge's own fault and is reported as one, never
as the GPU's. Only a check that fails otherwise declares the GPU not usable.

Does not decide a verdict: a candidate that crashed is its runtime_error either way
(tools/judge/record.py); this says only whether the judge can go on.
"""
from __future__ import annotations

import re

from tools.errors import EvaluatorError

# CUDA's words for "refused because a stream is capturing" (cudaErrorStreamCapture*), and
# torch's for a generator left in capture mode
_MET_CAPTURE = re.compile(r"stream is capturing|during capture|capture (?:sequence|invalidated)|"
                          r"outside graph capture|StreamCapture", re.IGNORECASE)


def met_capture(why: str) -> bool:
    """A health check's failure that a capture in progress caused, not the GPU."""
    return bool(_MET_CAPTURE.search(why or ""))


def check_gpu(gpu_index: int, after: str = "") -> None:
    """Return when the GPU runs the health check; EvaluatorError otherwise, saying whose
    fault it is. `after`: when this check ran, for the message (" after the candidate
    failed")."""
    import torch
    from tools.perf import gpuinfo
    if not torch.cuda.is_available():
        raise EvaluatorError("--device cuda but no CUDA device is visible")
    ok, why = gpuinfo.cuda_healthy(gpu_index)
    if ok:
        return
    if met_capture(why):
        ok, again = gpuinfo.cuda_healthy(gpu_index)
        if ok:
            return
        if met_capture(again):
            raise EvaluatorError(f"the judge's check of GPU {gpu_index}{after} met a CUDA graph capture in "
                                 f"its own process twice ({again}): the judge's fault, not the GPU's; "
                                 "please report")
        why = again
    raise EvaluatorError(f"GPU {gpu_index} is not usable{after}: {why}")
