"""krefine's counter kernel, in Triton: one launch adds one to up to 16 integer counters.

A training-mode BatchNorm adds one to its `num_batches_tracked` at every forward. Inductor writes
each as a launch of its own, a one-element kernel that takes the GPU about a microsecond and the
host tens (KernelBench level 3's ResNet-101: 104 of its forward's 565 launches). A seed writes
them all as `add_one([counter, ...])` (tools/dialect/counters.py gathers them): one launch
for every 16. Each counter is a one-element integer tensor, updated in place.

This file stands alone (torch and triton only): a seed copies its text, unchanged, into its
`ModelNew`, so `best.py` carries it.
"""
import triton
import triton.language as tl

MAX_COUNTERS = 16   # counters one launch takes


@triton.jit
def _plus_one(p):
    tl.store(p, tl.load(p) + 1)


@triton.jit
def add_one_kernel(p0, p1, p2, p3, p4, p5, p6, p7, p8, p9, p10, p11, p12, p13, p14, p15, N: tl.constexpr):
    """Adds one to the counters at p0 .. p{N-1}; the rest are p0 again, never touched."""
    _plus_one(p0)
    if N > 1:
        _plus_one(p1)
    if N > 2:
        _plus_one(p2)
    if N > 3:
        _plus_one(p3)
    if N > 4:
        _plus_one(p4)
    if N > 5:
        _plus_one(p5)
    if N > 6:
        _plus_one(p6)
    if N > 7:
        _plus_one(p7)
    if N > 8:
        _plus_one(p8)
    if N > 9:
        _plus_one(p9)
    if N > 10:
        _plus_one(p10)
    if N > 11:
        _plus_one(p11)
    if N > 12:
        _plus_one(p12)
    if N > 13:
        _plus_one(p13)
    if N > 14:
        _plus_one(p14)
    if N > 15:
        _plus_one(p15)


def add_one(counters):
    """counter.add_(1) for each one-element integer tensor of `counters` (distinct tensors), in
    launches of up to MAX_COUNTERS."""
    for i in range(0, len(counters), MAX_COUNTERS):
        chunk = list(counters[i:i + MAX_COUNTERS])
        add_one_kernel[(1,)](*chunk, *[chunk[0]] * (MAX_COUNTERS - len(chunk)), N=len(chunk), num_warps=1)
