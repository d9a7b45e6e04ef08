"""krefine's seed draw, in Triton: the seeds a forward's random kernels key their numbers on.

A forward that draws its own random numbers (`h0 = torch.randn(...)`, `torch.rand_like(x)`,
`torch.bernoulli(p)`) is written by Inductor as Triton kernels that make the numbers from
Philox (`tl.randn(seed, offset)`), keyed on int64 seeds it first draws with PyTorch
(`aten.randint.low_out(-2**63, 2**63 - 1, [n], out=seeds)`, a library kernel). A seed
writes that draw as `draw_seeds(seeds)`: one launch fills `seeds` from Philox keyed on the
generator of the buffer's device, which the draw advances as torch's own draws do:

- cuda: the generator's seed and offset; the offset moves past the draw (`set_offset`), so
  `torch.manual_seed(s)` repeats a forward's numbers and torch's later draws are not these;
- cpu (its generator has no offset): the seed, and a count of draws kept here per seed.

The numbers are a sample of the same distribution, not torch's values draw for draw: a
forward whose outputs depend on them is matched by no kernel, and the judge says so
(`stochastic_reference`); one whose outputs do not (an LSTM's random initial state, forgotten
over a long sequence) is judged as any other.

This file stands alone (torch and triton only): a seed copies its text, unchanged, into its
`ModelNew`, so `best.py` carries it.
"""
import torch
import triton
import triton.language as tl

_CPU_DRAWS = {}   # the cpu generator's seed -> seeds drawn so far under it: that generator has no offset


_HALF = 31   # seed and offset travel as two 31-bit halves each: always i32, one compiled kernel for every call


# not specialised on their values (== 1, a multiple of 16): a draw's offset moves every call, and the
# launch a forward is timed with must be the one it was checked with
@triton.jit(do_not_specialize=["seed_lo", "seed_hi", "offset_lo", "offset_hi"])
def draw_seeds_kernel(out_ptr, seed_lo, seed_hi, offset_lo, offset_hi, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    seed = (seed_hi.to(tl.int64) << 31) | seed_lo.to(tl.int64)
    offset = ((offset_hi.to(tl.int64) << 31) | offset_lo.to(tl.int64)) + i
    hi, lo, _, _ = tl.randint4x(seed, offset)   # four uint32 words from the Philox counter `offset`
    word = (hi.to(tl.uint64) << 32) | lo.to(tl.uint64)
    tl.store(out_ptr + i, word.to(tl.int64, bitcast=True), mask=i < n)


def draw_seeds(out):
    """Fills the int64 tensor `out` (contiguous) with seeds over the whole int64 range, keyed on
    its device's generator, and advances that generator past them."""
    n = out.numel()
    if out.device.type == "cuda":
        gen = torch.cuda.default_generators[out.device.index if out.device.index is not None
                                            else torch.cuda.current_device()]
        offset = gen.get_offset()
        gen.set_offset(offset + 4 * ((n + 3) // 4))   # torch's offsets move by multiples of 4
    else:
        gen = torch.default_generator
        offset = _CPU_DRAWS.get(gen.initial_seed(), 0)
        _CPU_DRAWS[gen.initial_seed()] = offset + n
    block, mask = 128, (1 << _HALF) - 1
    seed, offset = gen.initial_seed() % (1 << 2 * _HALF), offset % (1 << 2 * _HALF)
    draw_seeds_kernel[(triton.cdiv(n, block),)](out, seed & mask, seed >> _HALF, offset & mask, offset >> _HALF, n,
                                                 BLOCK=block, num_warps=1)
    return out
