"""extract_code: the candidate module out of whatever a model wrote around it."""
from __future__ import annotations

from agent.loop.extract import extract_code

MODULE = '''import torch
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, tl.maximum(x, 0.0), mask=offs < n)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
        return out
'''
HELPER = '''import torch


def reference(x):
    """The long helper block without ModelNew: longer than MODULE on purpose."""
    y = torch.relu(x)
    y = y + 0
    y = y * 1
    y = y - 0
    y = y / 1
    y = y.clone()
    y = y.contiguous()
    y = y.float()
    y = torch.nn.functional.relu(y) + torch.zeros_like(y) + torch.zeros_like(y) + torch.zeros_like(y)
    y = torch.nn.functional.relu(y) + torch.zeros_like(y) + torch.zeros_like(y) + torch.zeros_like(y)
    y = torch.nn.functional.relu(y) + torch.zeros_like(y) + torch.zeros_like(y) + torch.zeros_like(y)
    return y
'''


def test_one_fenced_block_with_prose_around_it():
    text = f"Here is the optimized code:\n```python\n{MODULE}```\nThis fuses the ReLU into one kernel."
    assert extract_code(text) == MODULE


def test_the_block_defining_modelnew_wins_over_a_longer_one():
    assert len(HELPER) > len(MODULE)
    text = f"First a helper:\n```python\n{HELPER}```\nThen the model:\n```python\n{MODULE}```\n"
    assert extract_code(text) == MODULE


def test_without_modelnew_the_longest_python_block_wins():
    short = "import torch\nx = 1\n"
    text = f"```python\n{short}```\n\n```python\n{HELPER}```\n"
    assert extract_code(text) == HELPER


def test_a_python_block_wins_over_a_longer_block_in_another_language():
    shell = "import os; echo " + "x" * 500 + "\n"
    text = f"```bash\n{shell}```\n```python\nimport torch\nx = 1\n```\n"
    assert extract_code(text) == "import torch\nx = 1\n"


def test_a_missing_closing_fence_runs_to_the_end():
    assert extract_code(f"Sure.\n```python\n{MODULE}") == MODULE


def test_a_missing_opening_fence_ends_at_the_closing_one():
    assert extract_code(f"{MODULE}```\n\nThe kernel above computes ReLU elementwise.") == MODULE


def test_raw_code_without_fences_loses_the_prose_before_and_after():
    text = f"Here is the Triton version of your model.\n\n{MODULE}\nNote: the kernel assumes a contiguous input.\n"
    assert extract_code(text) == MODULE


def test_raw_code_is_returned_as_is():
    assert extract_code(MODULE) == MODULE


def test_everything_after_an_end_of_turn_token_is_dropped():
    text = f"```python\n{MODULE}```<|eot_id|>```python\nclass ModelNew: pass\n```"
    assert extract_code(text) == MODULE


def test_special_tokens_inside_the_text_are_removed():
    assert extract_code(f"<|begin_of_text|>```python\n{MODULE}<|end_header_id|>```") == MODULE


def test_an_indented_block_is_dedented():
    indented = "".join(f"    {ln}" if ln.strip() else ln for ln in MODULE.splitlines(keepends=True))
    assert extract_code(f"1. Use this:\n\n   ```python\n{indented}   ```\n") == MODULE


def test_a_tilde_fence_counts_as_a_fence():
    assert extract_code(f"~~~python\n{MODULE}~~~\n") == MODULE


def test_prose_only_gives_none():
    assert extract_code("I cannot write a Triton kernel for this model, sorry.\n```\n```") is None


def test_empty_and_gibberish_give_none():
    assert extract_code("") is None
    assert extract_code("tNe\ufffd 0 ?? }} xq") is None


def test_windows_line_endings_are_normalised():
    assert extract_code(MODULE.replace("\n", "\r\n")) == MODULE
