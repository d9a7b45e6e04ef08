"""krefine's convolution family (tools/kernels/conv.py) against cuDNN at equal precision (--gemm: its GEMM family).

Each shape below is a convolution of a KernelBench level 1, 2 or 3 problem (its numbers,
not its file); inputs are channels-last for both sides (what Inductor hands a
convolution). For each shape, two comparisons:

  tf32   cuDNN with allow_tf32=True        vs the family at precision="tf32";
  fp32   cuDNN with allow_tf32=False       vs the family at precision="tf32x3"
         (and at "ieee" with --ieee: exact products on the CUDA cores).

The ratio is cuDNN's time / the family's (>= 1: the family is faster); the aim is >= 0.9
forward, >= 0.8 transposed. Each row also gives the family's tf32x3 error against exact
cuDNN (largest difference over the output's largest magnitude), beside cuDNN TF32's. Where
this GPU's rule (conv_config, given the device's shared memory) picks another tf32
configuration than the 96-KiB rule every GPU gets, that one is timed too, in the same run:
the A/B of the wider tiles; where the rule rounds x and w to TF32 before the loop (ROUNDED),
the same tiles rounding in the loop are timed beside, their bits compared. --sweep times a
few launch configurations per shape at tf32 and reports the best. Progress goes to stderr,
the markdown table to stdout, every figure to --out as JSON.

    python benchmarks/conv_bench.py --out conv_bench.json [--ieee] [--sweep] [--only NAME]

--gemm [TREE] times the GEMM family (tools/kernels/gemm.py) instead, on level-3 linear layers
(x (M, K) times a weight (N, K) transposed, plus its bias, as Inductor hands `addmm` over):
cuBLAS exact fp32 (allow_tf32=False) against the family's rule at "ieee" and "tf32x3", TREE's
copy of the family at its own rule beside it (an older checkout: the A/B of a change), and,
with --sweep, a few launch configurations at "tf32x3"; then the host microseconds per call of
a small Linear through the family (and TREE's) and through cuBLAS.

--bn times the batch-statistics kernel (tools/kernels/batchnorm.py) instead, on level-3 BatchNorm
inputs (channels-last, as a convolution hands them over): a training BatchNorm's statistics and
running update through the family (one launch) and through Inductor (torch.compile of the same
var_mean and update: its split reduction), GPU ms of each, cuDNN's whole training batch_norm
(statistics and normalize) beside them, the family's error against float64, and host us a call.

--layout times the 1x1 convolutions of level-3 networks instead (MobileNetV1's pointwise, ResNet101's
bottlenecks, EfficientNetB0's expand and project; channels-last input, the module's own OIHW weight):
the exact ("ieee") path as the family runs it, the weight packed (taps, in, out) by a copy a call,
against the same kernel reading the weight as it is (input channels contiguous, no copy): GPU us of
each convolution, the copy's own, and host us a call of each way.

--host [TREE] times the host instead: microseconds of Python and launch per call (the
GPU never the bound: each call queues a small convolution) for the family and for
F.conv2d (cuDNN), on ResNet-18's 64-channel 3x3 convolution, with TREE's copy of the family
beside this one's in alternate blocks (an older krefine checkout: the A/B of a change).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
import triton
from triton.testing import do_bench

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tools.kernels.conv import conv_member, conv_nd, conv_transpose_nd  # noqa: E402
from tools.kernels import conv as K  # noqa: E402

# name: (transposed, batch, c_in, c_out, spatial, kernel, stride, padding, dilation, groups, output_padding)
SHAPES = {
    "L1-54 conv3d 3->64 k3 64^3": (False, 16, 3, 64, (64, 64, 64), 3, 1, 0, 1, 1, 0),
    "L1-55 conv2d 64->128 k3 512x1024": (False, 8, 64, 128, (512, 1024), 3, 1, 0, 1, 1, 0),
    "L1-56 conv2d 64->128 k5x7 512x256": (False, 8, 64, 128, (512, 256), (5, 7), 1, 0, 1, 1, 0),
    "L1-63 conv2d 16->128 k3 1024^2": (False, 16, 16, 128, (1024, 1024), 3, 1, 0, 1, 1, 0),
    "L1-67 conv1d 64->128 k3 L131072": (False, 32, 64, 128, (131072,), 3, 1, 0, 1, 1, 0),
    "L1-76 conv1d s3 d4": (False, 64, 64, 128, (524280,), 3, 3, 0, 4, 1, 0),
    "L1-80 conv2d k5x9 dil(2,3)": (False, 8, 32, 64, (512, 512), (5, 9), 1, (2, 4), (2, 3), 1, 0),
    "L1-82 depthwise 64 k3 512^2": (False, 16, 64, 64, (512, 512), 3, 1, 0, 1, 64, 0),
    "L1-85 depthwise 128 k3x7": (False, 32, 128, 128, (128, 256), (3, 7), 1, 0, 1, 128, 0),
    "L1-87 pointwise 64->128 1024^2": (False, 16, 64, 128, (1024, 1024), 1, 1, 0, 1, 1, 0),
    "L2-1 conv2d 64->128 k3 128^2": (False, 128, 64, 128, (128, 128), 3, 1, 0, 1, 1, 0),
    "L2-21 conv2d 8->32 k3 256^2": (False, 128, 8, 32, (256, 256), 3, 1, 0, 1, 1, 0),
    "L2-47 conv3d 32->64 k3 32x64x64": (False, 16, 32, 64, (32, 64, 64), 3, 1, 0, 1, 1, 0),
    "L2-92 conv2d 8->64 k3 128^2": (False, 128, 8, 64, (128, 128), 3, 1, 0, 1, 1, 0),
    "L1-57 convT2d 64->64 k3 1024^2": (True, 8, 64, 64, (1024, 1024), 3, 1, 0, 1, 1, 0),
    "L1-64 convT1d 128->128 k3": (True, 64, 128, 128, (65536,), 3, 1, 0, 1, 1, 0),
    "L1-72 convT3d s2 g4 k3x5x7": (True, 8, 32, 32, (12, 24, 48), (3, 5, 7), 2, (1, 2, 3), 1, 4, 1),
    "L1-75 convT2d s(2,3) g4 d(2,1)": (True, 16, 32, 64, (128, 256), (3, 5), (2, 3), (1, 2), (2, 1), 4, 0),
    "L1-77 convT3d s2 d2 k3": (True, 16, 32, 64, (16, 32, 32), 3, 2, 1, 2, 1, 0),
    "L1-81 convT2d s5 d2 k3": (True, 16, 32, 64, (64, 128), 3, 5, 1, 2, 1, 0),
    "L2-2 convT2d s2 op1 64->64 128^2": (True, 128, 64, 64, (128, 128), 3, 2, 1, 1, 1, 1),
    "L2-26 convT3d s2 op1 32->64 16^3": (True, 128, 32, 64, (16, 16, 16), 3, 2, 1, 1, 1, 1),
    "L2-93 convT2d s2 k4 64->128 64^2": (True, 128, 64, 128, (64, 64), 4, 2, 0, 1, 1, 0),
    # level 3's own: VGG16's deeper 3x3 layers and AlexNet's 5x5 (batch 10)
    "L3-11 conv2d 256->256 k3 56^2": (False, 10, 256, 256, (56, 56), 3, 1, 1, 1, 1, 0),
    "L3-11 conv2d 512->512 k3 28^2": (False, 10, 512, 512, (28, 28), 3, 1, 1, 1, 1, 0),
    "L3-11 conv2d 256->512 k3 28^2": (False, 10, 256, 512, (28, 28), 3, 1, 1, 1, 1, 0),
    "L3-5 conv2d 96->256 k5 27^2": (False, 10, 96, 256, (27, 27), 5, 1, 2, 1, 1, 0),
}

SWEEP = [dict(BLOCK_M=m, BLOCK_N=n, BLOCK_K=k, num_warps=w, num_stages=s)
         for m, n, k, w, s in [(128, 128, 32, 4, 3), (128, 64, 32, 4, 4), (64, 128, 32, 4, 3),
                               (128, 128, 32, 8, 3), (64, 64, 32, 4, 4), (128, 128, 16, 4, 4),
                               (128, 256, 32, 8, 3), (256, 128, 32, 8, 3)]]   # the last two: Hopper's wide tiles


def _tensors(shape):
    transposed, n, c_in, c_out, spatial, kernel, stride, padding, dilation, groups, out_pad = shape
    nd = len(spatial)
    kernel = (kernel,) * nd if isinstance(kernel, int) else kernel
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn((n, c_in, *spatial), device="cuda", generator=g)
    if nd in (2, 3):
        x = x.to(memory_format=torch.channels_last if nd == 2 else torch.channels_last_3d)
    w_shape = (c_in, c_out // groups, *kernel) if transposed else (c_out, c_in // groups, *kernel)
    w = torch.randn(w_shape, device="cuda", generator=g) / math.sqrt(c_in // groups * math.prod(kernel))
    b = torch.randn(c_out, device="cuda", generator=g)
    return x, w, b


def _calls(shape, x, w, b):
    transposed, _, c_in, _, spatial, _, stride, padding, dilation, groups, out_pad = shape
    nd = len(spatial)
    if transposed:
        torch_fn = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[nd - 1]
        return (lambda: torch_fn(x, w, b, stride, padding, out_pad, groups, dilation),
                lambda precision, config=None: conv_transpose_nd(x, w, b, stride, padding, out_pad, groups, dilation,
                                                                 precision=precision, config=config))
    torch_fn = (F.conv1d, F.conv2d, F.conv3d)[nd - 1]
    return (lambda: torch_fn(x, w, b, stride, padding, dilation, groups),
            lambda precision, config=None: conv_nd(x, w, b, stride, padding, dilation, groups, precision=precision,
                                                   config=config))


# name: (M, K, N) of a level-3 linear layer: batch rows, input and output features
GEMMS = {
    "L3-1 MLP 128x16384 -> 16384": (128, 16384, 16384),
    "L3-2 MLP 128x16384 -> 32768": (128, 16384, 32768),
    "L3-3 MLP 1024x8192 -> 1024": (1024, 8192, 1024),
    "L3-3 MLP 1024x1024 -> 1024": (1024, 1024, 1024),
    "L3-43 qkv 65536x768 -> 2304": (65536, 768, 2304),
    "L3-44 fc 65536x3072 -> 768": (65536, 3072, 768),
}
GEMM_SWEEP = [(128, 128, 32, 4, 3), (128, 128, 32, 8, 3), (128, 128, 64, 8, 3), (128, 64, 32, 4, 4),
              (64, 128, 32, 4, 4), (128, 256, 32, 8, 3), (256, 128, 32, 8, 3), (64, 64, 32, 4, 4),
              (64, 64, 64, 4, 3), (64, 128, 64, 4, 3)]


def gemm_rows(then, sweep: bool) -> list[dict]:
    """Each level-3 linear layer: cuBLAS exact fp32, the family's rule at ieee and tf32x3 (and
    `then`'s, TREE's copy of the family), the sweep's best at tf32x3; errors against cuBLAS exact
    (largest over largest)."""
    from tools.kernels import gemm as G
    rows = []
    torch.backends.cuda.matmul.allow_tf32 = False   # cuBLAS exact fp32: the reference and the time compared
    for i, (name, (m, k, n)) in enumerate(GEMMS.items(), 1):
        g = torch.Generator(device="cuda").manual_seed(0)
        x = torch.randn(m, k, device="cuda", generator=g)
        w = torch.randn(n, k, device="cuda", generator=g) / math.sqrt(k)
        b, out = torch.randn(n, device="cuda", generator=g), torch.empty(m, n, device="cuda")
        truth = F.linear(x, w, b)
        row = {"name": name, "mnk": [m, n, k], "gflop": 2 * m * n * k / 1e9, "cublas_ms": _ms(lambda: F.linear(x, w, b))}
        for fam, label in [(G, "")] + ([(then, "then_")] if then else []):
            for p in ("ieee", "tf32x3"):
                row[f"{label}{p}_ms"] = _ms(lambda: fam.gemm(x, w.t(), out=out, bias=b, precision=p))
                row[f"{label}{p}_err"] = _rel_err(fam.gemm(x, w.t(), out=out, bias=b, precision=p), truth)
        row["rule"] = G.gemm_config(m, n, k, "cuda")
        if sweep:
            timed = [(_ms(lambda: G.gemm(x, w.t(), out=out, bias=b, precision="tf32x3", config=c)), c)
                     for c in GEMM_SWEEP]
            row["sweep"] = [{"config": c, "ms": t} for t, c in timed]
            row["sweep_best_ms"], row["sweep_best_config"] = min(timed)
        print(f"[{i}/{len(GEMMS)}] {name}: cuBLAS {row['cublas_ms']:.3f} ms, ieee {row['ieee_ms']:.3f}, tf32x3 "
              f"{row['tf32x3_ms']:.3f}" + (f", then {row['then_ieee_ms']:.3f} / {row['then_tf32x3_ms']:.3f}"
                                          if then else "") +
              (f", sweep best {row['sweep_best_ms']:.3f} {row['sweep_best_config']}" if sweep else ""),
              file=sys.stderr, flush=True)
        rows.append(row)
        torch.cuda.empty_cache()
    return rows


def gemm_host(tree: str | None, then, blocks: int = 5, calls: int = 200) -> dict:
    """Host microseconds per call of a small Linear (64 x 64 x 64, bias, tf32x3): the family's
    (and `then`'s, TREE's copy), cuBLAS's; median of `blocks` blocks of `calls` calls launched back to back."""
    from tools.kernels import gemm as G
    fams = {"this tree": G, **({tree: then} if then is not None else {})}
    x, w, b, out = (torch.randn(*s, device="cuda") for s in ((64, 64), (64, 64), (64,), (64, 64)))
    fns = {f"{k}: gemm": (lambda g=g: g.gemm(x, w.t(), out=out, bias=b, precision="tf32x3")) for k, g in fams.items()}
    fns["cuBLAS: F.linear"] = lambda: F.linear(x, w, b)
    host = _host_us(fns, blocks, calls)
    print("host us a call: " + ", ".join(f"{k} {v}" for k, v in host.items()), file=sys.stderr, flush=True)
    return host


def _tree_family(tree: str, name: str):
    """TREE's copy of tools/kernels/NAME.py, loaded beside this tree's."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(f"{name}_then", Path(tree) / "tools" / "kernels" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _host_us(fns: dict, blocks: int, calls: int) -> dict:
    """Each function's host microseconds a call: in each of `blocks` blocks, every function in turn
    warmed up, then `calls` calls back to back; the median over the blocks."""
    import statistics
    times = {k: [] for k in fns}
    for _ in range(blocks):
        for k, f in fns.items():
            for _ in range(20):
                f()
            torch.cuda.synchronize()
            t = time.perf_counter()
            for _ in range(calls):
                f()
            times[k].append((time.perf_counter() - t) / calls * 1e6)
            torch.cuda.synchronize()
    return {k: round(statistics.median(v), 1) for k, v in times.items()}


def gemm_table(rows) -> str:
    then, sweep = "then_ieee_ms" in rows[0], "sweep_best_ms" in rows[0]
    head = ["layer", "GFLOP", "cuBLAS fp32 ms", "ieee ms", "ratio", "tf32x3 ms", "ratio", "err tf32x3"] + \
        (["then ieee ms", "then tf32x3 ms", "tf32x3 speedup over then"] if then else []) + \
        (["sweep best tf32x3 ms", "config"] if sweep else [])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["name"], f"{r['gflop']:.0f}", f"{r['cublas_ms']:.3f}", f"{r['ieee_ms']:.3f}",
                 f"{r['cublas_ms'] / r['ieee_ms']:.2f}", f"{r['tf32x3_ms']:.3f}", f"{r['cublas_ms'] / r['tf32x3_ms']:.2f}",
                 f"{r['tf32x3_err']:.1e}"]
        if then:
            cells += [f"{r['then_ieee_ms']:.3f}", f"{r['then_tf32x3_ms']:.3f}", f"{r['then_tf32x3_ms'] / r['tf32x3_ms']:.2f}"]
        if sweep:
            cells += [f"{r['sweep_best_ms']:.3f}", str(tuple(r["sweep_best_config"]))]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _ms(fn) -> float:
    return do_bench(fn, warmup=10, rep=50, return_mode="median")


def _rel_err(y, truth) -> float:
    """In fp32: a float64 copy of the largest outputs here would not fit beside them."""
    return ((y - truth).abs().max() / truth.abs().max().clamp_min(1e-30)).item()


def _rules(shape, out_shape):
    """(this GPU's rule's tf32 configuration for the shape, the 96-KiB rule's); ({}, {}) off the igemm member."""
    transposed, n, c_in, c_out, spatial, kernel, stride, *_, groups, _ = shape
    if conv_member(False, 1 if transposed else groups, c_in // groups) != "igemm":   # a transposed one: its dot path
        return {}, {}
    st = [stride] * len(spatial) if isinstance(stride, int) else list(stride)
    positions = n * math.prod(-(-o // s) for o, s in zip(out_shape[2:], st)) if transposed else \
        n * math.prod(out_shape[2:])
    args = ("igemm", c_in // groups, c_out // groups, positions, "cuda", torch.float32, "tf32")
    taps = math.prod((kernel,) * len(spatial) if isinstance(kernel, int) else kernel)
    return K.conv_config(*args, K._smem(torch.device("cuda")), taps), K.conv_config(*args)


def bench_one(name, shape, ieee: bool, sweep: bool) -> dict:
    x, w, b = _tensors(shape)
    cudnn, ours = _calls(shape, x, w, b)
    transposed, c_in, groups = shape[0], shape[2], shape[9]
    row = {"name": name, "transposed": transposed,
           "member": conv_member(transposed, groups, c_in // groups)}
    flops = 2 * math.prod(cudnn().shape) * (c_in // groups) * math.prod(w.shape[2:])
    row["gflop"] = flops / 1e9
    # exact-fp32 cuDNN is the reference for errors (a float64 cuDNN convolution of these
    # sizes would take longer than the whole benchmark)
    torch.backends.cudnn.allow_tf32 = False
    truth = cudnn()
    for label, tf32, precision in [("tf32", True, "tf32"), ("fp32", False, "tf32x3")] + \
            ([("ieee", False, "ieee")] if ieee else []):
        torch.backends.cudnn.allow_tf32 = tf32
        row[f"{label}_cudnn_err"] = _rel_err(cudnn(), truth)
        row[f"{label}_ours_err"] = _rel_err(ours(precision), truth)
        row[f"{label}_cudnn_ms"] = _ms(cudnn)
        row[f"{label}_ours_ms"] = _ms(lambda: ours(precision))
        row[f"{label}_ratio"] = row[f"{label}_cudnn_ms"] / row[f"{label}_ours_ms"]
    torch.backends.cudnn.allow_tf32 = True
    here, rule96 = _rules(shape, cudnn().shape)
    if rule96 != here:   # this GPU's rule takes more shared memory: the 96-KiB rule timed beside it
        row["tf32_rule96_ms"], row["tf32_rule96_config"] = _ms(lambda: ours("tf32", rule96)), rule96
    if here.get("ROUNDED"):   # x and w rounded to TF32 by a launch each before: rounding in the loop timed beside
        row["tf32_in_loop_same_bits"] = bool(torch.equal(ours("tf32", dict(ROUNDED=False)), ours("tf32")))
        row["tf32_in_loop_ms"] = _ms(lambda: ours("tf32", dict(ROUNDED=False)))
    if sweep:
        timed = []
        for cfg in SWEEP:
            try:
                timed.append((_ms(lambda: ours("tf32", cfg)), cfg))
            except Exception as e:      # a config that does not fit (shared memory): skipped
                print(f"    config {cfg}: {type(e).__name__}", file=sys.stderr)
        if timed:
            best_ms, best_cfg = min(timed, key=lambda t: t[0])
            row["sweep_best_ms"], row["sweep_best_config"] = best_ms, best_cfg
            row["sweep_best_ratio"] = row["tf32_cudnn_ms"] / best_ms
    del truth, x, w, b
    torch.cuda.empty_cache()
    return row


def table(rows, ieee: bool, sweep: bool) -> str:
    head = ["shape", "member", "GFLOP", "cuDNN tf32 ms", "tf32 ms", "ratio", "cuDNN fp32 ms", "tf32x3 ms", "ratio",
            "err tf32x3 / cuDNN tf32"]
    if ieee:
        head += ["ieee ms", "ratio"]
    if sweep:
        head += ["best sweep tf32 ratio"]
    rule96 = any("tf32_rule96_ms" in r for r in rows)
    if rule96:
        head += ["tf32 ms, 96-KiB rule", "this rule's speedup"]
    in_loop = any("tf32_in_loop_ms" in r for r in rows)
    if in_loop:
        head += ["tf32 ms rounding in the loop (same bits)", "rounded before: speedup"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["name"], r["member"], f"{r['gflop']:.1f}", f"{r['tf32_cudnn_ms']:.3f}", f"{r['tf32_ours_ms']:.3f}",
                 f"{r['tf32_ratio']:.2f}", f"{r['fp32_cudnn_ms']:.3f}", f"{r['fp32_ours_ms']:.3f}",
                 f"{r['fp32_ratio']:.2f}", f"{r['fp32_ours_err']:.1e} / {r['tf32_cudnn_err']:.1e}"]
        if ieee:
            cells += [f"{r['ieee_ours_ms']:.3f}", f"{r['ieee_ratio']:.2f}"]
        if sweep:
            cells += [f"{r.get('sweep_best_ratio', float('nan')):.2f}"]
        if rule96:
            cells += [f"{r['tf32_rule96_ms']:.3f}", f"{r['tf32_rule96_ms'] / r['tf32_ours_ms']:.2f}"] \
                if "tf32_rule96_ms" in r else ["", ""]
        if in_loop:
            cells += [f"{r['tf32_in_loop_ms']:.3f} ({r['tf32_in_loop_same_bits']})",
                      f"{r['tf32_in_loop_ms'] / r['tf32_ours_ms']:.2f}"] if "tf32_in_loop_ms" in r else ["", ""]
        lines.append("| " + " | ".join(cells) + " |")
    for kind, rows_k in (("forward", [r for r in rows if not r["transposed"]]),
                         ("transposed", [r for r in rows if r["transposed"]])):
        if rows_k:
            gm = {p: math.exp(sum(math.log(r[f"{p}_ratio"]) for r in rows_k) / len(rows_k)) for p in ("tf32", "fp32")}
            lines.append(f"\n{kind}: geomean ratio tf32 {gm['tf32']:.2f}, fp32 (tf32x3) {gm['fp32']:.2f} "
                         f"over {len(rows_k)} shapes")
    return "\n".join(lines)


def host_cost(tree: str | None, blocks: int = 4, calls: int = 200) -> list[dict]:
    """Host microseconds per call (median of `blocks` blocks), each family and cuDNN in turn."""
    families = {"this tree": sys.modules["tools.kernels.conv"], **({tree: _tree_family(tree, "conv")} if tree else {})}
    x = torch.randn(2, 64, 56, 56, device="cuda").to(memory_format=torch.channels_last)
    weights = {"channels-last weight": torch.randn(64, 64, 3, 3, device="cuda").to(memory_format=torch.channels_last),
               "contiguous weight": torch.randn(64, 64, 3, 3, device="cuda")}
    rows = []
    for wname, w in weights.items():
        calls_by = {f"{name}: conv_nd igemm": (lambda K=K: K.conv_nd(x, w, None, 1, 1, member="igemm"))
                    for name, K in families.items()}
        calls_by["cuDNN: F.conv2d"] = lambda: F.conv2d(x, w, None, 1, 1)
        times = _host_us(calls_by, blocks, calls)
        rows += [{"weight": wname, "call": k, "host_us": v} for k, v in times.items()]
        print("\n".join(f"{wname}, {r['call']}: {r['host_us']} us a call" for r in rows[-len(times):]),
              file=sys.stderr, flush=True)
    return rows


BN_SHAPES = {"MobileNetV1 conv1 (10, 32, 112, 112)": (10, 32, 112, 112), "ResNet101 stem (10, 64, 112, 112)":
             (10, 64, 112, 112), "MobileNetV1 (10, 256, 28, 28)": (10, 256, 28, 28),
             "ResNet101 layer3 (10, 1024, 14, 14)": (10, 1024, 14, 14), "MobileNetV1 (10, 1024, 7, 7)": (10, 1024, 7, 7),
             "ResNet101 layer4 (10, 2048, 7, 7)": (10, 2048, 7, 7), "EfficientNetB2 (2, 96, 112, 112)": (2, 96, 112, 112)}


def bn_rows() -> list[dict]:
    from tools.kernels.batchnorm import batch_stats

    def inductor_stats(x, rm, rv, unbias):
        var, mean = torch.var_mean(x, [0, 2, 3], correction=0, keepdim=True)
        rm.copy_(mean.flatten() * 0.1 + rm * 0.9)
        rv.copy_(var.flatten() * unbias * 0.1 + rv * 0.9)
        return var, mean
    compiled = torch.compile(inductor_stats)
    rows = []
    for name, shape in BN_SHAPES.items():
        x = torch.randn(shape, device="cuda").to(memory_format=torch.channels_last) * 2 + 0.5
        c, n = shape[1], x.numel() // shape[1]
        rm, rv, w, b = (torch.zeros(c, device="cuda"), torch.ones(c, device="cuda"), torch.ones(c, device="cuda"),
                        torch.zeros(c, device="cuda"))
        var, mean = batch_stats(x)
        tv, tm = torch.var_mean(x.double(), [0, 2, 3], correction=0, keepdim=True)
        fns = {"family": lambda: batch_stats(x, rm, rv, 0.1, n / (n - 1)),
               "inductor": lambda: compiled(x, rm, rv, n / (n - 1)),
               "cudnn_bn": lambda: F.batch_norm(x, rm, rv, w, b, training=True)}
        row = {"name": name, "shape": list(shape), **{f"{k}_ms": _ms(f) for k, f in fns.items()},
               "var_err": ((var.double() - tv).abs().max() / tv.abs().max()).item(),
               "mean_err": ((mean.double() - tm).abs().max() / tv.abs().max().sqrt()).item()}
        row.update({f"{k}_host_us": v for k, v in _host_us({k: fns[k] for k in ("family", "inductor")}, 3, 100).items()})
        rows.append(row)
        print(f"{name}: family {row['family_ms'] * 1e3:.1f} us, Inductor {row['inductor_ms'] * 1e3:.1f} us, "
              f"cuDNN batch_norm {row['cudnn_bn_ms'] * 1e3:.1f} us; host {row['family_host_us']} vs "
              f"{row['inductor_host_us']} us", file=sys.stderr, flush=True)
    return rows


# name: (batch, c_in, c_out, size): level-3 1x1 convolutions (stride 1, no padding)
LAYOUT_SHAPES = {"MobileNetV1 32->64 112": (10, 32, 64, 112), "MobileNetV1 128->256 28": (10, 128, 256, 28),
                 "MobileNetV1 512->512 14": (10, 512, 512, 14), "MobileNetV1 1024->1024 7": (10, 1024, 1024, 7),
                 "ResNet101 64->256 56": (10, 64, 256, 56), "ResNet101 256->64 56": (10, 256, 64, 56),
                 "ResNet101 1024->256 14": (10, 1024, 256, 14), "ResNet101 2048->512 7": (10, 2048, 512, 7),
                 "EfficientNetB0 16->96 112": (10, 16, 96, 112), "EfficientNetB0 1152->192 7": (10, 1152, 192, 7)}


def layout_rows() -> list[dict]:
    """The family as it is (exact path: the weight packed (taps, in, out) by a copy a call) against the same
    kernel reading the module's 1x1 weight as it is (input channels contiguous: `_igemm_order` patched, here only)."""
    rows, packing = [], K._igemm_order
    for name, (n, c_in, c_out, size) in LAYOUT_SHAPES.items():
        x = torch.randn(n, c_in, size, size, device="cuda").to(memory_format=torch.channels_last)
        w, b = torch.randn(c_out, c_in, 1, 1, device="cuda") / c_in ** 0.5, torch.randn(c_out, device="cuda")
        order = packing(4, x.dtype, "ieee", 1)
        packed, tiny = K._in_order(w, order), x[:1, :, :2, :2]
        row = {"name": name, "shape": [n, c_in, c_out, size], "copy_us": _ms(lambda: K._in_order(w, order)) * 1e3,
               "packed_us": _ms(lambda: conv_nd(x, packed, b)) * 1e3}
        ref, host = conv_nd(x, w, b), {"copy_then_packed": _host_us({"f": lambda: conv_nd(tiny, w, b)}, 3, 100)["f"]}
        try:
            K._igemm_order = lambda nd, *a: list(range(nd))   # the weight read as it is (no packing)
            K._PLANS.clear()
            row["diff"] = (conv_nd(x, w, b) - ref).abs().max().item()   # the same sums in the same order: 0
            row["as_is_us"] = _ms(lambda: conv_nd(x, w, b)) * 1e3
            host["as_is"] = _host_us({"f": lambda: conv_nd(tiny, w, b)}, 3, 100)["f"]
        finally:
            K._igemm_order = packing
            K._PLANS.clear()
        row.update({f"{k}_host_us": v for k, v in host.items()})
        rows.append(row)
        print(f"{name}: as is {row['as_is_us']:.1f} vs packed {row['packed_us']:.1f} us (+ copy {row['copy_us']:.1f}); "
              f"host {row['as_is_host_us']} vs {row['copy_then_packed_host_us']} us", file=sys.stderr, flush=True)
    return rows


def _save(out: str, **figures) -> None:
    """Every figure of a run to `out` as JSON, under the GPU's name and the torch and Triton versions."""
    Path(out).write_text(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                                     "triton": triton.__version__, **figures}, indent=1) + "\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON file for every figure")
    ap.add_argument("--ieee", action="store_true", help="also time precision='ieee' against exact cuDNN")
    ap.add_argument("--sweep", action="store_true", help="also time a few launch configurations at tf32")
    ap.add_argument("--only", default="", help="only shapes whose name contains this")
    ap.add_argument("--host", nargs="?", const="", default=None, metavar="TREE",
                    help="time host cost per call instead (TREE: an older checkout's family beside this one's)")
    ap.add_argument("--gemm", nargs="?", const="", default=None, metavar="TREE",
                    help="time the GEMM family on level-3 linear layers instead (TREE: an older checkout's beside)")
    ap.add_argument("--bn", action="store_true", help="time the batch-statistics kernel on level-3 BatchNorms instead")
    ap.add_argument("--layout", action="store_true", help="time level-3 1x1 convolutions' weight read as it is "
                    "against packed instead")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("conv_bench: needs a CUDA GPU", file=sys.stderr)
        return 2
    if args.layout:
        rows = layout_rows()
        _save(args.out, layout=rows)
        print("| 1x1 convolution (exact) | GPU us as is / packed | the copy's us | host us as is / copy + packed | "
              "max diff |\n|---|---|---|---|---|")
        print("\n".join(f"| {r['name']} | {r['as_is_us']:.1f} / {r['packed_us']:.1f} | {r['copy_us']:.1f} | "
                        f"{r['as_is_host_us']} / {r['copy_then_packed_host_us']} | {r['diff']:.1e} |" for r in rows))
        return 0
    if args.bn:
        rows = bn_rows()
        _save(args.out, bn=rows)
        print("| BatchNorm input | family us | Inductor us | cuDNN batch_norm us | var err | host us family / Inductor |")
        print("|---|---|---|---|---|---|")
        print("\n".join(f"| {r['name']} | {r['family_ms'] * 1e3:.1f} | {r['inductor_ms'] * 1e3:.1f} | "
                        f"{r['cudnn_bn_ms'] * 1e3:.1f} | {r['var_err']:.1e} | {r['family_host_us']} / "
                        f"{r['inductor_host_us']} |" for r in rows))
        return 0
    if args.gemm is not None:
        if args.gemm and not (Path(args.gemm) / "tools" / "kernels" / "gemm.py").is_file():
            print(f"conv_bench: {args.gemm}: no tools/kernels/gemm.py there", file=sys.stderr)
            return 2
        then = _tree_family(args.gemm, "gemm") if args.gemm else None
        rows = gemm_rows(then, args.sweep)
        host = gemm_host(args.gemm, then)
        _save(args.out, gemm=rows, gemm_host_us=host)
        print(f"\n{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}\n")
        print(gemm_table(rows))
        print("\nhost us a call (64 x 64 x 64 Linear): " + ", ".join(f"{k} {v}" for k, v in host.items()))
        return 0
    if args.host is not None:
        if args.host and not (Path(args.host) / "tools" / "kernels" / "conv.py").is_file():
            print(f"conv_bench: {args.host}: no tools/kernels/conv.py there", file=sys.stderr)
            return 2
        rows = host_cost(args.host or None)
        _save(args.out, host=rows)
        print("| weight | call | host us a call |\n|---|---|---|")
        print("\n".join(f"| {r['weight']} | {r['call']} | {r['host_us']} |" for r in rows))
        return 0
    rows, t0 = [], time.monotonic()
    shapes = {k: v for k, v in SHAPES.items() if args.only in k}
    for i, (name, shape) in enumerate(shapes.items(), 1):
        t = time.monotonic()
        try:
            rows.append(bench_one(name, shape, args.ieee, args.sweep))
            r = rows[-1]
            print(f"[{i}/{len(shapes)}] {name}: tf32 {r['tf32_ratio']:.2f}x, fp32 {r['fp32_ratio']:.2f}x "
                  f"({time.monotonic() - t:.1f} s)", file=sys.stderr, flush=True)
        except Exception as e:     # one shape's failure is reported, the others still run
            print(f"[{i}/{len(shapes)}] {name}: FAILED {type(e).__name__}: {e}", file=sys.stderr, flush=True)
            torch.cuda.empty_cache()
    device = torch.cuda.get_device_name()
    _save(args.out, rows=rows, wall_s=time.monotonic() - t0)
    print(f"\n{device}, torch {torch.__version__}, triton {triton.__version__}\n")
    print(table(rows, args.ieee, args.sweep) if rows else "no shape ran")
    return 0 if len(rows) == len(shapes) else 1


if __name__ == "__main__":
    sys.exit(main())
