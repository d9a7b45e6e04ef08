"""torch's precision flags for fp32 work, as the judge sets them for the reference, eager
and torch.compile ([eval] precision: "strict" or "as-run") and for the seed's capture.
Re-exported by tools/problem.py."""
from __future__ import annotations

import contextlib
import threading


# torch's precision flags are the process's: a strict reference computed under strict_fp32
# in one judge thread must not leave eager timed without TF32 in another (as_the_user_has_it)
_PRECISION = threading.RLock()


def precision_flags(policy: str):
    """The precision flags the policy runs the reference, eager and torch.compile with:
    "strict" -> strict_fp32(), "as-run" -> as_the_user_has_it(). Both hold the lock, so a
    session of the other policy in another thread cannot flip them meanwhile."""
    if policy == "strict":
        return strict_fp32()
    if policy == "as-run":
        return as_the_user_has_it()
    raise ValueError(f"unknown precision policy {policy!r}")   # our bug: settings validated it


def fp32_precisions(device: str) -> dict[str, str]:
    """How torch computes fp32 convolutions and matmuls on `device` with the flags as they
    are now: "tf32" or "ieee" each (for the verdict; call it inside precision_flags). On
    cpu "ieee": TF32 is a tensor-core format, the flags change nothing there."""
    import torch
    if not str(device).startswith("cuda"):
        return {"conv": "ieee", "matmul": "ieee"}
    cudnn, matmul = torch.backends.cudnn, torch.backends.cuda.matmul
    try:
        conv_tf32, mm_tf32 = cudnn.allow_tf32, matmul.allow_tf32
    except RuntimeError:    # torch >= 2.9 with the APIs mixed: the per-backend precisions
        conv_tf32 = cudnn.conv.fp32_precision == "tf32"
        mm_tf32 = matmul.fp32_precision == "tf32"
    return {"conv": "tf32" if conv_tf32 else "ieee", "matmul": "tf32" if mm_tf32 else "ieee"}


@contextlib.contextmanager
def as_the_user_has_it():
    """The precision flags as the process has them, unchanged by any strict_fp32 block of
    another thread for as long as this one lasts ([eval] precision "as-run": the reference,
    eager and torch.compile)."""
    with _PRECISION:
        yield


@contextlib.contextmanager
def strict_fp32():
    """fp32 math in fp32 for the block: TF32 off for cuDNN convolutions and cuBLAS
    matmuls; the flags as they were after. torch's default lets cuDNN convolve fp32
    tensors in TF32 (a 10-bit mantissa, ~5e-4 relative error a product), beyond
    KernelBench's fp32 tolerance (1e-4): a reference computed so fails an exact fp32
    kernel, and Inductor's convolution template takes its ALLOW_TF32 from the same flag
    (a seed captured under it is a TF32 kernel). Used for the reference, eager and
    torch.compile under [eval] precision "strict" (precision_flags), and for the seed's
    capture (tools/dialect/inductor_capture.py) under either policy."""
    import torch
    cudnn, matmul = torch.backends.cudnn, torch.backends.cuda.matmul
    with _PRECISION:
        # the legacy flags: their setters keep torch's per-backend precisions consistent
        # (the new fp32_precision setters, mixed with them, leave states whose getters raise)
        try:
            saved = (cudnn.allow_tf32, matmul.allow_tf32)
        except RuntimeError:    # torch >= 2.9, a problem that mixed the APIs: the exact sub-flags
            subs = [(cudnn.conv, "ieee"), (cudnn.rnn, "ieee"), (matmul, "ieee")]
            before = [b.fp32_precision for b, _ in subs]
            for b, v in subs:
                b.fp32_precision = v
            try:
                yield
            finally:
                for (b, _), v in zip(subs, before):
                    b.fp32_precision = v
            return
        cudnn.allow_tf32 = matmul.allow_tf32 = False
        try:
            yield
        finally:
            cudnn.allow_tf32, matmul.allow_tf32 = saved
