"""A tiny random-weight Llama with an offline tokenizer, for testing the real
transformers path without weights from the hub.

`build_tiny_llama(directory)` writes a 2-layer, hidden-64 LlamaForCausalLM and a byte-level
BPE tokenizer trained in memory on KernelLLM's prompt and some Triton code, with Llama 3's
special tokens and post-processor (add_special_tokens=True prepends <|begin_of_text|>, as
the real tokenizer does, so a second BOS would show). Its output is noise: it will not
compile, which is what the loop's feedback path needs to see.

Use the session-scoped fixture from a test module:
    from llm_fixtures import tiny_llama_dir  # noqa: F401  (pytest fixture)
"""
from __future__ import annotations

from pathlib import Path

import pytest

BOS, END_OF_TEXT, EOT = "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"

_TRITON_SAMPLE = '''import torch
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


def build_tiny_llama(directory: Path, seed: int = 0) -> Path:
    """Write the tiny model and its tokenizer to `directory`; return it."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from agent.loop.prompting import render_initial

    # 1) tokenizer: byte-level BPE, so any text round-trips
    corpus = [render_initial(_TRITON_SAMPLE), _TRITON_SAMPLE] * 4
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(corpus, trainers.BpeTrainer(
        vocab_size=800, special_tokens=[BOS, END_OF_TEXT, EOT],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", special_tokens=[(BOS, tok.token_to_id(BOS))])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=BOS, eos_token=EOT)
    # 2) model: random weights, Llama architecture
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=8192, bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=[tokenizer.eos_token_id, tok.token_to_id(END_OF_TEXT)])
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(directory)
    model.save_pretrained(directory)
    return directory


@pytest.fixture(scope="session")
def tiny_llama_dir(tmp_path_factory) -> Path:
    return build_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))
