"""Prompts: the first turn is KernelLLM's trained template byte for byte; refinement
turns carry the module, the parent and its feedback, fitted to the token budgets."""
from __future__ import annotations

import dataclasses

import pytest

from agent import REPO_ROOT
from agent.config import PromptConfig
from agent.loop.prompting import render_feedback, render_initial, render_refine
from tools.verdict import Diagnostic, Status, Timing, Verdict

# Verbatim copy of PROMPT_TEMPLATE from kernelllm.py, the script shipped with the model:
# https://huggingface.co/facebook/KernelLLM/blob/main/kernelllm.py (read at revision
# 1a5b094218caf3bc082ceb130596e406c89e4f94; the 10,532-byte file, also mirrored at
# https://huggingface.co/alpindale/KernelLLM-MLX-Q8/blob/main/kernelllm.py).
# kernelllm.py fills it with PROMPT_TEMPLATE.format(code). Do not edit: it is the reference.
PROMPT_TEMPLATE = """
<|begin_of_text|>You write custom Triton kernels to replace the pytorch operators in the given architecture to get speedups.

You have complete freedom to choose the set of operators you want to replace. You may make the decision to replace some operators with custom Triton kernels and leave others unchanged. You may replace multiple operators with custom implementations, consider operator fusion opportunities (combining multiple operators into a single kernel, for example, combining matmul+relu), or algorithmic changes (such as online softmax). You are only limited by your imagination.


Here's an example to show you the syntax of inline embedding custom operators from the Triton DSL in torch: The example given architecture is:
```
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, a, b):
        return a + b


def get_inputs():
    # randomly generate input tensors based on the model architecture
    a = torch.randn(1, 128).cuda()
    b = torch.randn(1, 128).cuda()
    return [a, b]


def get_init_inputs():
    # randomly generate tensors required for initialization based on the model architecture
    return []

```
The example new arch with custom Triton kernels looks like this:
```
import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def add_kernel(
    x_ptr,  # Pointer to first input
    y_ptr,  # Pointer to second input
    out_ptr,  # Pointer to output
    n_elements,  # Total number of elements in input/output
    BLOCK_SIZE: tl.constexpr,
):
    # Each program handles a contiguous block of data of size BLOCK_SIZE
    block_start = tl.program_id(0) * BLOCK_SIZE
    # Create a range of offsets [0..BLOCK_SIZE-1]
    offsets = block_start + tl.arange(0, BLOCK_SIZE)
    # Mask to ensure we don't go out of bounds
    mask = offsets < n_elements
    # Load input values
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    y = tl.load(y_ptr + offsets, mask=mask, other=0.0)
    # Perform the elementwise addition
    out = x + y
    # Store the result
    tl.store(out_ptr + offsets, out, mask=mask)


def triton_add(x: torch.Tensor, y: torch.Tensor):
    \"\"\"
    This function wraps the Triton kernel call. It:
      1. Ensures the inputs are contiguous on GPU.
      2. Calculates the grid (blocks) needed.
      3. Launches the Triton kernel.
    \"\"\"
    assert x.is_cuda and y.is_cuda, "Tensors must be on CUDA."
    x = x.contiguous()
    y = y.contiguous()

    # Prepare output tensor
    out = torch.empty_like(x)

    # Number of elements in the tensor
    n_elements = x.numel()
    BLOCK_SIZE = 128  # Tunable parameter for block size

    # Determine the number of blocks needed
    grid = lambda meta: ((n_elements + meta["BLOCK_SIZE"] - 1) // meta["BLOCK_SIZE"],)

    # Launch the Triton kernel
    add_kernel[grid](x, y, out, n_elements, BLOCK_SIZE=BLOCK_SIZE)
    return out


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, a, b):
        # Instead of "return a + b", call our Triton-based addition
        return triton_add(a, b)

```

You are given the following architecture:
```
{}
```

Optimize the architecture named Model with custom Triton kernels! Name your optimized output architecture ModelNew. Output the new code in codeblocks. Please generate real code, NOT pseudocode, make sure the code compiles and is fully functional. Just output the new model code, no other text, and NO testing code!
"""


PROBLEM = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.softmax(x, dim=self.dim)


def get_inputs():
    return [torch.randn(16, 1024)]


def get_init_inputs():
    return [1]
"""
PARENT = """import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n_cols + offs, mask=offs < n_cols, other=-float("inf"))
    tl.store(out_ptr + row * n_cols + offs, tl.exp(x) / tl.sum(tl.exp(x), 0), mask=offs < n_cols)


class ModelNew(torch.nn.Module):
    def __init__(self, dim: int):
        super().__init__()

    def forward(self, x):
        out = torch.empty_like(x)
        softmax_kernel[(x.shape[0],)](x, out, x.shape[1], BLOCK=1024)
        return out
"""
COMPILE_ERROR = Verdict(
    status=Status.COMPILE_ERROR,
    diagnostics=(Diagnostic("triton_compile", "at 10:8: NameError('offs_x is not defined')", 10,
                            'x = tl.load(x_ptr + row * n_cols + offs_x, mask=offs < n_cols)'),),
    feedback="Does not compile.")
INCORRECT = Verdict(
    status=Status.INCORRECT,
    diagnostics=(Diagnostic("mismatch", "trial 1: 6% of elements differ; max abs err 0.031"),),
    checks={"comparisons": [{"trial": 1, "call": 1, "output": 0, "ok": False, "max_abs_err": 0.0312,
                             "rel_l2": 0.0071, "frac_bad": 0.0625, "first_bad_index": [0, 1016],
                             "patterns": ["tail:last 8 columns"]}],
            "seeds": [123456789]})
SLOW = Verdict(
    status=Status.CORRECT,
    timing={"candidate": Timing.from_samples([0.0420]), "eager": Timing.from_samples([0.0300]),
            "compile": Timing.from_samples([0.0250])},
    speedup_eager=0.714, speedup_compile=0.595,
    bottleneck={"class": "latency-bound", "evidence": ["grid of 16 blocks on 132 SMs: 0.12 waves"],
                "hints": ["launch more programs: split the long axis"], "roofline_fraction": 0.08},
    kernels=({"name": "softmax_kernel", "n_regs": 40, "n_spills": 0},),
    flags=("below_roofline",))


def words(text: str) -> int:
    """A deterministic stand-in tokenizer: one token per whitespace-separated word."""
    return len(text.split())


def refine(verdict: Verdict, **config) -> str:
    return render_refine(PROBLEM, PARENT, verdict, PromptConfig(**config), words)


@pytest.mark.parametrize("code", [PROBLEM, "x = {'a': 1}  # {{ not jinja }} {% raw %}\n", ""])
def test_initial_prompt_is_byte_identical_to_kernelllm_prompt_template(code):
    assert render_initial(code) == PROMPT_TEMPLATE.format(code)


def test_refine_prompt_ends_with_the_trained_instruction_like_the_initial_prompt():
    ask = PROMPT_TEMPLATE[PROMPT_TEMPLATE.index("Optimize the architecture named Model"):]
    assert refine(SLOW).endswith(ask) and render_initial(PROBLEM).endswith(ask)


def test_refine_prompt_starts_like_the_trained_template():
    assert refine(SLOW).startswith("\n<|begin_of_text|>You write custom Triton kernels")


def test_refine_prompt_carries_the_module_and_the_parent_whole():
    prompt = refine(COMPILE_ERROR)
    assert PROBLEM in prompt and PARENT.rstrip("\n") in prompt


def test_refine_prompt_carries_the_compile_error_with_its_line_number_and_source_line():
    prompt = refine(COMPILE_ERROR)
    assert "compile_error" in prompt
    assert "at line 10: at 10:8: NameError('offs_x is not defined')" in prompt
    assert "`x = tl.load(x_ptr + row * n_cols + offs_x, mask=offs < n_cols)`" in prompt


def test_refine_prompt_carries_the_numeric_diff_of_an_incorrect_candidate():
    prompt = refine(INCORRECT)
    assert "max_abs_err: 0.0312" in prompt and "frac_bad: 0.0625" in prompt
    assert "tail:last 8 columns" in prompt


def test_refine_prompt_leaves_out_the_secret_seeds():
    assert "123456789" not in refine(INCORRECT)


def test_refine_prompt_carries_timing_and_speedups():
    prompt = refine(SLOW)
    assert "ModelNew 0.042 ms, PyTorch eager 0.03 ms, torch.compile 0.025 ms" in prompt
    assert "0.714x vs eager, 0.595x vs torch.compile" in prompt


def test_refine_prompt_carries_the_bottleneck_class_evidence_and_hints():
    prompt = refine(SLOW)
    for text in ("latency-bound", "grid of 16 blocks on 132 SMs: 0.12 waves",
                 "launch more programs: split the long axis", "roofline_fraction: 0.08"):
        assert text in prompt


def test_refine_prompt_without_a_bottleneck_has_no_profile_section():
    assert "Profile of ModelNew" not in refine(INCORRECT)


@pytest.mark.parametrize("budget", [0, 10, 25, 40, 60, 1000])
def test_feedback_fits_the_token_budget_beyond_the_status_line(budget):
    for verdict in (COMPILE_ERROR, INCORRECT, SLOW):
        status_only = render_feedback(verdict, 0, words)
        assert words(render_feedback(verdict, budget, words)) <= max(budget, words(status_only))


def test_feedback_cuts_the_least_important_sections_first():
    full = render_feedback(SLOW, 10_000, words)
    budget = words(full.split("\n\nProfile of ModelNew")[0])   # room for status and timing only
    cut = render_feedback(SLOW, budget, words)
    assert "0.714x vs eager" in cut and "latency-bound" not in cut and "below_roofline" not in cut


def test_feedback_with_no_budget_keeps_the_status_line():
    assert render_feedback(COMPILE_ERROR, 0, words).startswith("Result: compile_error.")


def test_a_long_error_is_cut_in_the_middle_keeping_its_last_line():
    message = "\n".join(f"frame {i}: some context" for i in range(300)) + "\nValueError: the real cause"
    verdict = Verdict(status=Status.RUNTIME_ERROR, diagnostics=(Diagnostic("runtime", message, 3, "y = f(x)"),))
    feedback = render_feedback(verdict, 120, words)
    assert words(feedback) <= 120 and "lines cut" in feedback and "the real cause" in feedback


def test_one_huge_line_is_cut_too():
    verdict = Verdict(status=Status.RUNTIME_ERROR, diagnostics=(Diagnostic("runtime", "x " * 5000),))
    assert words(render_feedback(verdict, 200, lambda s: len(s) // 4)) <= 200 * 4


def test_refine_prompt_fits_max_prompt_tokens_by_dropping_the_example_first():
    with_example = refine(SLOW, max_prompt_tokens=100_000)
    limit = words(with_example) - 50                   # the example is far more than 50 words
    prompt = refine(SLOW, max_prompt_tokens=limit)
    assert "Here's an example" not in prompt and "Here's an example" in with_example
    assert words(prompt) <= limit and "latency-bound" in prompt


def test_refine_prompt_never_cuts_the_module_or_the_parent_whatever_the_limit():
    prompt = refine(SLOW, max_prompt_tokens=10)
    assert PROBLEM in prompt and PARENT.rstrip("\n") in prompt and "Result: correct." in prompt


def test_prompt_text_lives_only_in_the_templates():
    sentences = ["Optimize the architecture named Model", "You write custom Triton kernels",
                 "Here is an earlier attempt", "Numeric check against Model"]
    for py in (REPO_ROOT / "agent").glob("*.py"):
        text = py.read_text()
        assert not [s for s in sentences if s in text], py


def test_a_verdict_with_only_the_evaluators_summary_carries_that_summary():
    verdict = Verdict(status=Status.RUNTIME_ERROR, feedback="Crashed while running.\n- CUDA error: illegal memory access")
    assert "CUDA error: illegal memory access" in render_feedback(verdict, 1000, words)


def test_checks_that_are_evaluator_internals_stay_out_of_the_prompt():
    verdict = dataclasses.replace(INCORRECT, checks={**INCORRECT.checks, "phase_s": {"test": 1.5},
                                                     "sandbox": {"netns": True}, "tolerance": {"atol": 1e-4}})
    prompt = refine(verdict)
    assert "netns" not in prompt and "phase_s" not in prompt and "tolerance.atol: 0.0001" in prompt


# -- the precision and launch facts the search found (issue 31, item 4) ------------------

LAUNCHED = '''\
import triton
import triton.language as tl


@triton.jit
def mm(a_ptr, b_ptr, c_ptr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pass


def call(a, b, c):
    mm[(64,)](a, b, c, BLOCK_M=64, BLOCK_N=128, num_warps=8, num_stages=3)
'''


def _with_dots(**dots) -> Verdict:
    return dataclasses.replace(SLOW, checks={**SLOW.checks, "dot_precision": dots})


def test_search_facts_name_each_kernels_launch_constants():
    from agent.loop.prompting import search_facts
    facts = search_facts(LAUNCHED, _with_dots())
    assert facts == ["launch mm: BLOCK_M=64, BLOCK_N=128, num_warps=8, num_stages=3"]


def test_search_facts_name_an_exact_fp32_dot_and_its_tensor_core_form():
    from agent.loop.prompting import search_facts
    fact = next(f for f in search_facts(LAUNCHED, _with_dots(ieee=2)) if f.startswith("tl.dot"))
    assert "ieee x 2" in fact and "tf32x3" in fact and "tolerance" in fact


def test_search_facts_give_the_lineage_oldest_first():
    from agent.loop.prompting import search_facts
    facts = search_facts(LAUNCHED, None, ["Inductor templates", "mm: BLOCK_M 128->64"])
    assert facts[0] == "found by: Inductor templates -> mm: BLOCK_M 128->64"


def test_facts_follow_the_verdicts_whole_feedback_in_a_refine_prompt():
    prompt = render_refine(PROBLEM, PARENT, SLOW, PromptConfig(), words, facts=["launch mm: BLOCK_M=64"])
    assert SLOW.feedback in prompt
    assert prompt.index(SLOW.feedback) + len(SLOW.feedback) < prompt.index("- launch mm: BLOCK_M=64")
