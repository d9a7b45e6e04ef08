"""What the capture changes in torch while Dynamo and Inductor compile a problem's forward
(tools/dialect/inductor_capture.py), so that its whole forward is one graph of ops Inductor
writes Triton for: transformer layers as their ops, logs out of the graph, recurrent layers
traced, Inductor's Triton backend for cpu tensors, its Triton templates, the folder its cache
lives in. Each is a context manager."""
from __future__ import annotations

import contextlib
from unittest import mock

STALE_S = 3600   # an empty capture folder older than this is a leftover (capture_dir): longer than any seed budget


@contextlib.contextmanager
def capture_dir():
    """A temporary folder for one capture's Inductor cache, under krefine-captures/ in the temp dir,
    removed after it. Inductor's compile workers, started during a capture with its cache folder in
    their environment, make that folder again as they start up, after it was removed: each capture
    first removes the empty folders there older than STALE_S (a live capture's holds files)."""
    import os
    import shutil
    import tempfile
    import time
    root = os.path.join(tempfile.gettempdir(), "krefine-captures")
    os.makedirs(root, exist_ok=True)
    for entry in os.scandir(root):
        try:
            if entry.is_dir(follow_symlinks=False) and time.time() - entry.stat().st_mtime > STALE_S \
                    and not any(files for _, _, files in os.walk(entry.path)):
                shutil.rmtree(entry.path, ignore_errors=True)
        except OSError:    # another process removed it first
            continue
    with tempfile.TemporaryDirectory(prefix="capture-", dir=root) as path:
        yield path


def causal_masks_as_given():
    """nn.Transformer's layers ask whether a mask is the causal one by comparing its values
    (`_detect_is_causal_mask`), a data-dependent branch Dynamo cannot trace: the capture
    applies the mask as given instead (is_causal only where the caller says so): the same
    softmax over the same masked scores. In eval mode their fused inference "fast path"
    (`aten._transformer_encoder_layer_fwd`, which Inductor leaves to PyTorch) is off: the same
    layer as its ops."""
    import contextlib
    from unittest import mock

    import torch
    stack = contextlib.ExitStack()
    stack.enter_context(mock.patch("torch.nn.modules.transformer._detect_is_causal_mask",
                                   lambda mask, is_causal=None, size=None: bool(is_causal)))
    mha = getattr(torch.backends, "mha", None)
    if mha is not None and hasattr(mha, "set_fastpath_enabled"):
        was = mha.get_fastpath_enabled()
        mha.set_fastpath_enabled(False)
        stack.callback(mha.set_fastpath_enabled, was)
    return stack


def warnings_out_of_graph():
    """A forward that warns (level 2's 28: InstanceNorm2d of a view whose dim 1 is not its
    num_features) broke the one graph on `warnings.warn`, which Dynamo cannot trace: it is
    moved out of the graph instead, as Dynamo's own hint says (a warning computes nothing)."""
    import contextlib
    import warnings
    from unittest import mock

    import torch._dynamo
    stack = contextlib.ExitStack()   # and a print, which Dynamo cannot trace: left out of the seed, as logs are
    stack.enter_context(mock.patch("builtins.print", _left_out))
    funcs = getattr(torch._dynamo.config, "reorderable_logging_functions", None)
    if funcs is not None:
        stack.enter_context(torch._dynamo.config.patch(reorderable_logging_functions={*funcs, warnings.warn}))
    return stack


def _left_out(*args, **kwargs) -> None:
    """print() while Dynamo traces the problem's forward."""


def rnn_in_graph():
    """nn.LSTM / GRU / RNN traced into the graph (Dynamo refuses them by default: a graph
    break), where Inductor's decomposition writes them as per-step matrix products (the
    GEMM family's launches, tools/kernels/gemm.py) and fused pointwise gates, every time
    step of every layer unrolled."""
    import contextlib

    import torch
    import torch._dynamo
    stack = contextlib.ExitStack()
    if hasattr(torch._dynamo.config, "allow_rnn"):
        stack.enter_context(torch._dynamo.config.patch(allow_rnn=True))
    # on cpu the decomposition picks oneDNN's whole-layer kernel (a fallback left to
    # PyTorch, `aten.mkldnn_rnn_layer`) while oneDNN is on: the generic one is matrix products
    stack.enter_context(torch.backends.mkldnn.flags(enabled=False))
    return stack


def nested_padding_zeroed(model, inputs):
    """nn.TransformerEncoder in eval mode, given a key padding mask, runs on nested tensors
    (its fast path), and its padded positions come out as zeros (`to_padded_tensor(0.0)`,
    before its norm); with the fast path off (`causal_masks_as_given`) they would be computed
    as tokens. Each encoder the eager forward runs so (found by running it once) is captured
    with a forward that zeroes them there, as the padded positions of its layers' output."""
    import contextlib

    import torch
    import torch.nn.functional as F
    from torch.nn import TransformerEncoder
    if not any(isinstance(m, TransformerEncoder) and not m.training and getattr(m, "use_nested_tensor", False)
               for m in model.modules()):
        return contextlib.nullcontext()
    nested, current = [], []
    forward, from_mask = TransformerEncoder.forward, torch._nested_tensor_from_mask

    def watched(self, *args, **kwargs):
        current.append(self)
        try:
            return forward(self, *args, **kwargs)
        finally:
            current.pop()

    def converted(*args, **kwargs):
        nested.extend(current[-1:])
        return from_mask(*args, **kwargs)
    rng = torch.random.get_rng_state()
    try:
        with mock.patch.object(TransformerEncoder, "forward", watched), \
                mock.patch.object(torch, "_nested_tensor_from_mask", converted), torch.no_grad():
            model(*inputs)
    finally:
        torch.random.set_rng_state(rng)

    def zeroed(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        if src_key_padding_mask is None:
            return forward(self, src, mask, src_key_padding_mask, is_causal)
        pad = F._canonical_mask(mask=src_key_padding_mask, mask_name="src_key_padding_mask",
                                other_type=F._none_or_dtype(mask), other_name="mask", target_type=src.dtype)
        out = src
        for layer in self.layers:
            out = layer(out, src_mask=mask, is_causal=bool(is_causal), src_key_padding_mask=pad)
        pad = pad != 0
        out = out.masked_fill((pad if self.layers[0].self_attn.batch_first else pad.t()).unsqueeze(-1), 0.0)
        return out if self.norm is None else self.norm(out)
    stack = contextlib.ExitStack()
    for enc in {id(e): e for e in nested}.values():
        stack.enter_context(mock.patch.object(enc, "forward", zeroed.__get__(enc), create=True))
    return stack


def _cpu_triton():
    """Inductor's Triton backend for cpu tensors, its kernels loaded by Triton's
    interpreter (nothing compiles for a cpu target). Its cache key asks Triton's active
    driver for a target, and there is none without a GPU: answer sm_90's backend."""
    import contextlib
    import functools
    import os
    from unittest import mock

    import torch
    import torch.utils._triton as torch_triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import make_backend

    stack = contextlib.ExitStack()
    stack.enter_context(mock.patch.dict(os.environ, {"TRITON_INTERPRET": "1"}))
    stack.enter_context(torch._inductor.config.patch(cpu_backend="triton"))
    stack.enter_context(mock.patch.object(torch_triton, "triton_backend",
                                          functools.cache(lambda: make_backend(GPUTarget("cuda", 90, 32)))))
    return stack


def _triton_templates():
    """Inductor config for GEMMs and convolutions written as Triton templates: max-autotune
    choosing among Triton template configs only (no ATen / cuBLAS / cuDNN fallback, whose
    extern call the guards would reject). A problem with no Triton template (1-D
    convolution) fails to compile: NoValidChoicesError, reported as the seed's reason."""
    import torch
    options = {"max_autotune": True, "max_autotune_gemm_backends": "TRITON",
               "max_autotune_conv_backends": "TRITON", "autotune_fallback_to_aten": False,
               # decompose_k's choice is a subgraph module called from the wrapper, which the
               # converter cannot launch ("unsupported wrapper statement: def
               # decompose_k_mm_256_split_7(args)"); the plain mm template stays
               "triton.num_decompose_k_splits": 0}
    return torch._inductor.config.patch({k: v for k, v in options.items() if _has_config(k)})


def _has_config(key: str) -> bool:
    """Whether this torch's Inductor config has `key` ("triton.x" is x in config.triton)."""
    import torch
    obj = torch._inductor.config
    for part in key.split("."):
        if not hasattr(obj, part):
            return False
        obj = getattr(obj, part)
    return True
