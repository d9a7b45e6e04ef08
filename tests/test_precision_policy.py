"""[eval] precision: the same rule on both sides of the comparison (tools/judge/accuracy.py).

On a CPU there is no TF32, so eager is exact and both policies decide alike for real
problems. Here eager is made inexact the way cuDNN makes it: the problem's forward rounds
its fp32 operands to TF32 while `torch.backends.cudnn.allow_tf32` is on (PyTorch's
default), as cuDNN's convolutions do, and computes float64 exactly (the judge's truth).
A second problem follows `torch.backends.cuda.matmul.allow_tf32` (off by default): an fp32
GEMM, whose eager is exact. The `gpu` tests at the end judge real cuDNN TF32 convolutions.
"""
from __future__ import annotations

import dataclasses

import pytest
import torch

from tools.judge.accuracy import EAGER_ERROR_MARGIN, decide, measured
from tools.judge.numerics import compare
from tools.settings import EvalSettings, TrialSettings
from tools.verdict import Status

FP32 = dict(atol=1e-4, rtol=1e-4, rel_l2_limit=1e-3)

_PROBLEM = '''
import torch
import torch.nn as nn

N = 32


def tf32(x):
    """x rounded to TF32 (10 mantissa bits, to nearest even), as a tensor core reads it."""
    i = x.view(torch.int32)
    return ((i + 0xFFF + ((i >> 13) & 1)) & -8192).view(torch.float32)


class Model(nn.Module):
    """A GEMM with fp32 operands in TF32 while FLAG is on; float64 exactly."""
    def forward(self, a, b):
        if a.dtype == torch.float32 and FLAG:
            a, b = tf32(a), tf32(b)
        return a @ b


def get_inputs():
    return [torch.randn(N, N), torch.randn(N, N)]


def get_init_inputs():
    return []
'''
# as cuDNN convolves: TF32 while the flag is on, as it is by default
CUDNN_LIKE = _PROBLEM.replace("FLAG", "torch.backends.cudnn.allow_tf32")
# as cuBLAS multiplies: the flag is off by default, so eager is exact
CUBLAS_LIKE = _PROBLEM.replace("FLAG", "torch.backends.cuda.matmul.allow_tf32")

_CANDIDATE = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rounded(x, DROP: tl.constexpr):
    # x to nearest even with DROP low mantissa bits cleared (13: TF32)
    i = x.to(tl.int32, bitcast=True)
    i = (i + ((1 << (DROP - 1)) - 1) + ((i >> DROP) & 1)) & -(1 << DROP)
    return i.to(tl.float32, bitcast=True)


@triton.jit
def matmul_kernel(a_ptr, b_ptr, o_ptr, N: tl.constexpr, MODE: tl.constexpr):
    idx = tl.arange(0, N)[:, None] * N + tl.arange(0, N)[None, :]
    a = tl.load(a_ptr + idx)
    b = tl.load(b_ptr + idx)
    exact = tl.dot(a, b, input_precision="ieee")
    as_tf32 = tl.dot(rounded(a, 13), rounded(b, 13), input_precision="ieee")
    if MODE == "exact":
        out = exact
    elif MODE == "tf32":
        out = as_tf32
    elif MODE == "mirror":       # TF32's error with its sign flipped: as large as eager's, not eager's
        out = 2.0 * exact - as_tf32
    else:                        # "double": twice TF32's error
        out = 3.0 * exact - 2.0 * as_tf32
    tl.store(o_ptr + idx, out)


class ModelNew(nn.Module):
    def forward(self, a, b):
        n = a.shape[0]
        out = torch.empty((n, n), device=a.device, dtype=a.dtype)
        matmul_kernel[(1,)](a.contiguous(), b.contiguous(), out, N=n, MODE=MODE)
        return out
'''


def candidate(mode: str) -> str:
    """A Triton GEMM: "exact" fp32, "tf32" (operands rounded as eager rounds them), "mirror"
    (as inexact as TF32 eager, its error of the opposite sign) or "double" (twice that)."""
    return _CANDIDATE.replace("MODE=MODE", f"MODE={mode!r}")


# operands in bf16, products accumulated in fp32: a kernel in bf16 on an fp32 problem (the
# interpreter's bf16 tl.dot is not bf16 arithmetic: the operands are rounded, the dot exact)
BF16 = candidate("exact").replace(
    'exact = tl.dot(a, b, input_precision="ieee")',
    'exact = tl.dot(a.to(tl.bfloat16).to(tl.float32), b.to(tl.bfloat16).to(tl.float32), input_precision="ieee")')


def _settings(precision: str) -> EvalSettings:
    return EvalSettings(test=TrialSettings(trials=2, gpu_cross_compile=False, precision=precision))


@pytest.fixture(scope="module")
def forkservers():
    """One set of fork servers (torch and triton imported once) for every session here."""
    servers: dict = {}
    yield servers
    for fs in servers.values():
        if fs is not None:
            fs.close()


def _verdicts(tmp_path_factory, forkservers, problem_src: str, precision: str, sources: dict[str, str]) -> dict:
    """Each candidate's verdict from one judge session of `precision` on the CPU."""
    from tools.judge import Judge
    from tools.problem import load_problem
    path = tmp_path_factory.mktemp("problem") / "problem.py"
    path.write_text(problem_src, encoding="utf-8")
    with Judge(load_problem(path), device="cpu", settings=_settings(precision), forkservers=forkservers) as judge:
        got = judge.judge_many([(f"{name}.py", src) for name, src in sources.items()], profile=False)
    return dict(zip(sources, got))


@pytest.fixture(scope="module")
def as_run(tmp_path_factory, forkservers):
    return _verdicts(tmp_path_factory, forkservers, CUDNN_LIKE, "as-run",
                     {"exact": candidate("exact"), "mirror": candidate("mirror"), "double": candidate("double"),
                      "bf16": BF16})


@pytest.fixture(scope="module")
def strict(tmp_path_factory, forkservers):
    return _verdicts(tmp_path_factory, forkservers, CUDNN_LIKE, "strict",
                     {"exact": candidate("exact"), "mirror": candidate("mirror"), "bf16": BF16})


@pytest.fixture(scope="module")
def exact_eager(tmp_path_factory, forkservers):
    return _verdicts(tmp_path_factory, forkservers, CUBLAS_LIKE, "as-run", {"tf32": candidate("tf32")})


# -- the judge's decisions -------------------------------------------------------------

def test_as_run_passes_a_candidate_as_inexact_as_eager_on_eager_s_bound(as_run):
    v = as_run["mirror"]
    assert v.status is Status.CORRECT, v.diagnostics
    assert any(c.get("truth_error", {}).get("bound") == "eager" for c in v.checks["comparisons"])


def test_strict_fails_the_candidate_as_inexact_as_tf32_eager(strict):
    assert strict["mirror"].status is Status.INCORRECT


def test_as_run_fails_a_candidate_twice_as_inexact_as_eager(as_run):
    v = as_run["double"]
    assert v.status is Status.INCORRECT and "truth_error.eager.rel_l2" in v.feedback   # what the model reads


def test_a_bf16_candidate_fails_under_as_run_for_its_bf16_sized_error(as_run):
    v = as_run["bf16"]
    assert v.status is Status.INCORRECT and 1e-3 < v.checks["precision"]["candidate_error"]["rel_l2"] < 1e-1


def test_a_bf16_candidate_fails_under_strict(strict):
    assert strict["bf16"].status is Status.INCORRECT


def test_an_exact_candidate_passes_as_run_against_a_tf32_eager_within_the_fp32_tolerance_of_the_truth(as_run):
    v = as_run["exact"]
    assert v.status is Status.CORRECT, v.diagnostics
    assert any(c.get("truth_error", {}).get("bound") == "fp32_tolerance" for c in v.checks["comparisons"])


def test_an_exact_candidate_passes_strict(strict):
    assert strict["exact"].status is Status.CORRECT, strict["exact"].diagnostics


def test_where_eager_is_exact_as_run_gives_a_tf32_candidate_no_slack(exact_eager):
    v = exact_eager["tf32"]
    assert v.status is Status.INCORRECT
    e = v.checks["precision"]
    assert e["eager_error"]["rel_l2"] < 1e-6 < e["candidate_error"]["rel_l2"]


# -- what the verdict says -------------------------------------------------------------

def test_the_verdict_names_the_policy_both_errors_against_the_truth_and_the_dot_precisions(as_run):
    p = as_run["mirror"].checks["precision"]
    assert p["policy"] == "as-run" and p["candidate_dots"] == {"ieee": 2} and p["margin"] == EAGER_ERROR_MARGIN
    assert p["eager_fp32"] == {"conv": "ieee", "matmul": "ieee"}   # cpu: no TF32
    cand, eager = p["candidate_error"]["rel_l2"], p["eager_error"]["rel_l2"]
    assert 1e-5 < eager and abs(cand / eager - 1) < 0.05


def test_a_strict_verdict_names_the_strict_policy(strict):
    assert strict["exact"].checks["precision"]["policy"] == "strict"


def test_the_reduced_precision_flag_states_the_as_run_rule(as_run):
    (d,) = [d for d in as_run["bf16"].diagnostics if d.kind == "guard:reduced_precision"]
    assert 'precision "as-run"' in d.message and "eager's own" in d.message


def test_the_reduced_precision_flag_states_the_strict_rule(strict):
    (d,) = [d for d in strict["bf16"].diagnostics if d.kind == "guard:reduced_precision"]
    assert 'precision "strict"' in d.message and "exact fp32" in d.message


# -- the rule on tensors ---------------------------------------------------------------

def _case(seed: int = 0):
    """(truth, eager): a float64 truth and a float32 'eager' off by TF32-size errors."""
    g = torch.Generator().manual_seed(seed)
    truth = torch.randn(64, 64, generator=g, dtype=torch.float64) * 4
    eager = (truth + torch.randn(64, 64, generator=g, dtype=torch.float64) * 2e-3).float()
    return truth, eager


def _decide(out, eager, truth, policy="as-run"):
    return decide(compare(out, eager, **FP32), out, eager, lambda: [truth], 0, policy)


def test_an_output_whose_error_mirrors_eager_s_passes_as_run_only():
    truth, eager = _case()
    out = (2 * truth - eager.double()).float()
    assert _decide(out, eager, truth).ok and not _decide(out, eager, truth, "strict").ok


def test_an_output_over_the_margin_by_its_maximum_alone_fails():
    truth, eager = _case()
    err = eager.double() - truth
    out = truth - err
    worst = err.abs().argmax()
    out.view(-1)[worst] = truth.view(-1)[worst] - 2 * err.view(-1)[worst]   # the norm barely moves
    c = _decide(out.float(), eager, truth)
    assert not c.ok and c.truth_error["candidate"]["rel_l2"] < EAGER_ERROR_MARGIN * c.truth_error["eager"]["rel_l2"]


def test_an_output_over_the_margin_by_its_norm_alone_fails():
    truth, eager = _case()
    err = eager.double() - truth
    cap = err.abs().max()
    out = truth - (3 * err).clamp(-0.9 * cap, 0.9 * cap)    # a smaller maximum, about twice the norm
    c = _decide(out.float(), eager, truth)
    assert not c.ok and c.truth_error["candidate"]["max_abs"] < c.truth_error["eager"]["max_abs"]


def test_where_eager_is_exact_an_output_off_by_tf32_size_fails():
    truth, _ = _case()
    eager = truth.float()
    out = (truth * (1 + 5e-4)).float()
    assert not _decide(out, eager, truth).ok


def test_a_nan_output_fails_as_run_without_asking_for_the_truth():
    truth, eager = _case()
    out = eager.clone()
    out[0, 0] = float("nan")
    asked = []
    c = decide(compare(out, eager, **FP32), out, eager, lambda: asked.append(1) or [truth], 0, "as-run")
    assert not c.ok and not asked


def test_without_a_float64_forward_as_run_keeps_the_reference_s_verdict_and_says_why():
    truth, eager = _case()
    out = (2 * truth - eager.double()).float()
    c = decide(compare(out, eager, **FP32), out, eager, lambda: None, 0, "as-run")
    assert not c.ok and c.truth_error == {"policy": "as-run", "why": "no float64 forward of the reference"}


def test_measured_adds_both_errors_to_an_output_that_passed_on_the_reference():
    truth, eager = _case()
    c = measured(_decide(eager, eager, truth), eager, eager, lambda: [truth], 0, "as-run")
    assert c.ok and c.truth_error["bound"] == "reference"
    assert c.truth_error["candidate"] == c.truth_error["eager"]


# -- where the policy comes from -------------------------------------------------------

_FLAG_PROBLEM = ("import torch\n\nclass Model(torch.nn.Module):\n"
                 "    def forward(self, x):\n"
                 "        return x + float(torch.backends.cudnn.allow_tf32)\n\n"
                 "def get_inputs():\n    return [torch.zeros(4)]\n\n"
                 "def get_init_inputs():\n    return []\n")


def test_the_as_run_reference_forward_runs_with_the_users_flags(tmp_path):
    from tools.judge.reference import compute_reference
    from tools.problem import build_model, load_problem
    p = tmp_path / "p.py"
    p.write_text(_FLAG_PROBLEM)
    prob = load_problem(p)
    model = build_model(prob.module.Model, prob.module, 42, "cpu")
    [out] = compute_reference(model, prob.module, 1, "cpu", init_seed=42, precision="as-run")
    assert out.tolist() == [float(torch.backends.cudnn.allow_tf32)] * 4


def test_the_default_policy_is_as_run():
    from agent.config import load_config
    assert load_config(None).eval.test.precision == "as-run" == TrialSettings().precision


def test_an_unknown_policy_in_the_file_is_one_line_naming_the_file_and_key(tmp_path):
    from agent.config import load_config
    from tools.errors import BadInput
    cfg = tmp_path / "agent.toml"
    cfg.write_text('[eval]\nprecision = "fast"\n')
    with pytest.raises(BadInput) as e:
        load_config(cfg)
    assert "precision" in str(e.value) and "'fast' is not one of 'as-run', 'strict'" in str(e.value)
    assert "\n" not in str(e.value)


def test_krefine_run_precision_sets_eval_precision():
    from agent.cli import RUN_FLAGS, build_parser, flag_overrides
    from agent.config import load_config
    args = build_parser().parse_args(["run", "p.py", "--precision", "strict"])
    assert load_config(None, *flag_overrides(args, RUN_FLAGS)).eval.test.precision == "strict"


def test_an_unknown_krefine_run_precision_is_bad_input():
    from agent.cli import build_parser
    from tools.errors import BadInput
    with pytest.raises(BadInput, match="--precision"):
        build_parser().parse_args(["run", "p.py", "--precision", "fast"])


def test_krefine_bench_precision_sets_eval_precision_for_every_setting():
    from agent.bench.suite import make_settings, parse_options
    settings = make_settings(parse_options(["--precision", "strict", "--sweep", "budget.max_rounds=1,2"]))
    assert [s.overrides["eval.precision"] for s in settings] == ["strict", "strict"]


def test_strict_times_eager_with_tf32_off_and_as_run_with_the_users_flags():
    from tools.problem import fp32_precisions, precision_flags
    if not torch.backends.cudnn.allow_tf32:
        pytest.skip("this process's cuDNN TF32 flag is off")
    with precision_flags("strict"):
        assert torch.backends.cudnn.allow_tf32 is False
    with precision_flags("as-run"):
        assert torch.backends.cudnn.allow_tf32 is True
        assert fp32_precisions("cuda:0")["conv"] == "tf32"


# -- real TF32 convolutions (GPU) ------------------------------------------------------

_CONV_PROBLEM = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    """A 3x3 convolution, no bias: cuDNN convolves fp32 in TF32 by default."""
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(64, 64, 3, bias=False)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(8, 64, 34, 34)]


def get_init_inputs():
    return []
'''

# implicit GEMM: each program computes BLOCK_P output pixels x all 64 output channels
_CONV_CANDIDATE = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rounded(x):
    # to TF32, to nearest even: rounded here, whatever a tensor core does with fp32's low bits
    i = x.to(tl.int32, bitcast=True)
    i = (i + 0xFFF + ((i >> 13) & 1)) & -8192
    return i.to(tl.float32, bitcast=True)


@triton.jit
def conv_kernel(x_ptr, w_ptr, y_ptr, P, H: tl.constexpr, W: tl.constexpr, C: tl.constexpr,
                K: tl.constexpr, OH: tl.constexpr, OW: tl.constexpr, BLOCK_P: tl.constexpr,
                MODE: tl.constexpr):
    pid = tl.program_id(0)
    p = pid * BLOCK_P + tl.arange(0, BLOCK_P)          # output pixel: n, oh, ow
    pm = p < P
    n = p // (OH * OW)
    oh = (p // OW) % OH
    ow = p % OW
    c = tl.arange(0, C)
    k = tl.arange(0, K)
    acc = tl.zeros((BLOCK_P, K), dtype=tl.float32)
    for r in range(3):
        for s in range(3):
            xo = n[:, None] * (C * H * W) + c[None, :] * (H * W) + (oh[:, None] + r) * W + (ow[:, None] + s)
            a = tl.load(x_ptr + xo, mask=pm[:, None], other=0.0)                 # [BLOCK_P, C]
            b = tl.load(w_ptr + k[None, :] * (C * 9) + c[:, None] * 9 + r * 3 + s)  # [C, K]
            if MODE == "ieee":
                acc += tl.dot(a, b, input_precision="ieee")
            elif MODE == "tf32":
                acc += tl.dot(rounded(a), rounded(b), input_precision="tf32")
            else:
                acc += tl.dot(a.to(tl.bfloat16), b.to(tl.bfloat16))
    yo = n[:, None] * (K * OH * OW) + k[None, :] * (OH * OW) + oh[:, None] * OW + ow[:, None]
    tl.store(y_ptr + yo, acc, mask=pm[:, None])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(64, 64, 3, bias=False)

    def forward(self, x):
        x = x.contiguous()
        n, c, h, w = x.shape
        k = self.conv.weight.shape[0]
        oh, ow = h - 2, w - 2
        y = torch.empty((n, k, oh, ow), device=x.device, dtype=x.dtype)
        p = n * oh * ow
        conv_kernel[(triton.cdiv(p, 64),)](x, self.conv.weight.contiguous(), y, p, H=h, W=w, C=c, K=k,
                                           OH=oh, OW=ow, BLOCK_P=64, MODE=MODE)
        return y
'''


def _conv_candidate(mode: str) -> str:
    return _CONV_CANDIDATE.replace("MODE=MODE", f"MODE={mode!r}")


def _gpu_verdicts(tmp_path_factory, precision: str, modes: tuple[str, ...]) -> dict:
    from tools.judge import Judge
    from tools.problem import load_problem
    path = tmp_path_factory.mktemp("conv") / "problem.py"
    path.write_text(_CONV_PROBLEM, encoding="utf-8")
    s = _settings(precision)
    s = dataclasses.replace(s, timing=dataclasses.replace(s.timing, compile_baseline=False, rounds=1,
                                                          max_rounds=1, iters_per_round=5, warmup=2))
    with Judge(load_problem(path), device="cuda", settings=s) as judge:
        return {m: judge.judge(_conv_candidate(m), candidate_name=f"{m}.py", profile=False) for m in modes}


@pytest.fixture(scope="module")
def gpu_as_run(tmp_path_factory):
    return _gpu_verdicts(tmp_path_factory, "as-run", ("ieee", "tf32", "bf16"))


@pytest.fixture(scope="module")
def gpu_strict(tmp_path_factory):
    return _gpu_verdicts(tmp_path_factory, "strict", ("ieee", "tf32", "bf16"))


@pytest.mark.gpu
def test_on_the_gpu_cudnn_convolves_the_as_run_reference_in_tf32(gpu_as_run):
    p = gpu_as_run["ieee"].checks["precision"]
    assert p["eager_fp32"]["conv"] == "tf32" and p["eager_error"]["rel_l2"] > 1e-4, p


@pytest.mark.gpu
def test_on_the_gpu_a_tf32_convolution_passes_as_run(gpu_as_run):
    v = gpu_as_run["tf32"]
    assert v.status is Status.CORRECT, (v.diagnostics, v.checks.get("precision"))


@pytest.mark.gpu
def test_on_the_gpu_a_tf32_convolution_fails_strict(gpu_strict):
    v = gpu_strict["tf32"]
    assert v.status is Status.INCORRECT and v.checks["precision"]["eager_fp32"]["conv"] == "ieee", v.checks


@pytest.mark.gpu
@pytest.mark.parametrize("policy", ["as-run", "strict"])
def test_on_the_gpu_a_bf16_convolution_fails_both_policies(gpu_as_run, gpu_strict, policy):
    v = {"as-run": gpu_as_run, "strict": gpu_strict}[policy]["bf16"]
    assert v.status is Status.INCORRECT, v.checks.get("precision")


@pytest.mark.gpu
@pytest.mark.parametrize("policy", ["as-run", "strict"])
def test_on_the_gpu_an_exact_convolution_passes_both_policies(gpu_as_run, gpu_strict, policy):
    v = {"as-run": gpu_as_run, "strict": gpu_strict}[policy]["ieee"]
    assert v.status is Status.CORRECT, (v.diagnostics, v.checks.get("precision"))


HALF_PROBLEM = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 3


def get_inputs():
    return [torch.randn(64).half()]


def get_init_inputs():
    return []
'''

HALF_CANDIDATE = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def triple_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, (tl.load(x_ptr + offs).to(tl.float32) * 3).to(tl.float16))


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        triple_kernel[(1,)](x, out, BLOCK=64)
        return out
'''


@pytest.mark.slow   # a judge session of its own on a CPU: about 8-11 s
def test_a_half_precision_models_candidate_is_not_flagged_reduced_precision(tmp_path):
    # the flag says an fp32 problem was computed in fp16; for Model's own fp16 outputs it said nothing true
    from shared_judges import verdict_of
    from tools.problem import load_problem
    path = tmp_path / "half.py"
    path.write_text(HALF_PROBLEM)
    verdict = verdict_of(load_problem(path), HALF_CANDIDATE)
    assert verdict.status.value == "correct" and "reduced_precision" not in verdict.flags
    assert verdict.checks["reduced_precision"] == "not flagged: Model's own outputs are float16"


# -- float64 outputs of fp32 work (`fc(x).double()`): judged as the fp32 work they are -----

def _fp32_matmul_two_ways():
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(32, 256, generator=g), torch.randn(256, 16, generator=g)
    eager = (a @ b).double()                                    # fp32 work, cast
    other = sum(a[:, i::8] @ b[i::8] for i in range(8)).double()   # the same in another summation order
    truth = a.double() @ b.double()
    return eager, other, truth


def _cmp(out, ref, s=TrialSettings()):
    from tools.judge.numerics import tolerances
    atol, rtol, rel = tolerances(ref.dtype, s)
    return compare(out, ref, atol=atol, rtol=rtol, rel_l2_limit=rel)


def test_a_double_of_fp32_work_passes_at_the_fp32_tolerance_when_eager_holds_fp32_values():
    eager, other, truth = _fp32_matmul_two_ways()
    assert not _cmp(other, eager).ok   # float64's own tolerance refuses a reordered sum
    got = decide(_cmp(other, eager), other, eager, lambda: [truth], 0, "strict", TrialSettings())
    assert got.ok and got.truth_error["bound"] == "fp32_work"


def test_a_genuine_float64_output_keeps_float64_s_tolerance():
    eager, other, truth = _fp32_matmul_two_ways()   # eager is the float64 forward itself here
    got = decide(_cmp(other, truth), other, truth, lambda: [truth], 0, "as-run", TrialSettings())
    assert not got.ok


def test_a_float64_output_eager_computes_partly_in_fp32_passes_within_fp32_s_tolerance_of_the_truth():
    eager, other, truth = _fp32_matmul_two_ways()
    eager, other = torch.log_softmax(eager, 1), torch.log_softmax(other, 1)   # float64 math after fp32 work
    truth = torch.log_softmax(truth, 1)
    got = decide(_cmp(other, eager), other, eager, lambda: [truth], 0, "as-run", TrialSettings())
    assert got.ok and got.truth_error["bound"] == "fp32_tolerance"
