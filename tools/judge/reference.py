"""The reference, in the judge: the problem's own Model on the trial inputs.

Covers `compute_reference` (get_inputs() of a seed, Model.forward on them, no grad,
with the precision flags of `[eval] precision` (tools/problem.py precision_flags: the
user's under "as-run", TF32 off under "strict"), outputs checked to be tensors),
`check_reproducible` (whether the reference gives its outputs again with the RNG seeded
otherwise: a random one, Dropout in training mode, can be matched by no kernel),
`state_carried` (one that does not, but a model built afresh does: it keeps state between
calls, and is judged as a sequence of calls, `sequence_outputs` and `precise_sequence`),
`precise_outputs` (the same forward in float64: the truth a float32 reference is rounded
from, for tools/judge/numerics.py's `against_truth`) and `default_device`. The Model is
built once per session with KernelBench's seeds and init order, in the mode `[eval]
module_mode` says (tools/judge/session.py's Judge); no candidate code runs here. A fault
of the problem's code here is the file's (exit 2) only when a fresh process fails the same
way (tools/blame.py).
"""
from __future__ import annotations

from tools.deadline import Deadline
from tools.errors import BadInput, describe_fault
from tools.blame import Step, blame
from tools.problem import make_inputs, output_fault, precision_flags, seeded
from tools.sandbox.state_ops import rng_states, same_states

_OTHER_SEED = 0x5EED   # added to the trial seed for the second draw: any other seed would do


def default_device() -> str:
    import torch
    return "cuda" if torch.cuda.is_available() else "cpu"


def build_reference(problem, dev: str, gpu_index: int, settings):
    """The problem's Model built as KernelBench builds it (its seeds and init order), in the
    mode `settings.module_mode` says, on `dev`; a fault of the problem's code is blamed."""
    import torch
    from tools.perf.capture_guard import gpu_work
    from tools.problem import build_model
    if dev.startswith("cuda"):
        torch.cuda.set_device(gpu_index)
    try:   # not beside a capture (its init draws)
        with gpu_work(), Deadline(settings.reference_timeout_s, problem.path, "Model(*get_init_inputs())"):
            return build_model(problem.module.Model, problem.module, settings.init_seed, dev, settings.module_mode)
    except Exception as e:
        blame(problem.path, e, "Model(*get_init_inputs())",
              Step("model", dev, init_seed=settings.init_seed, module_mode=settings.module_mode))


def compute_reference(ref_model, mod, seed: int, dev: str, *, init_seed: int, precision: str,
                      module_mode: str = "train", sizes: dict | None = None, timeout_s: float = 0) -> list:
    """The problem's own Model (built with `init_seed`) on the trial inputs of `seed`, with
    the flags of `precision` ([eval] precision): under "as-run" it is eager as the user runs it.
    An allocation failure is raised as it is, for the judge to relieve memory and
    retry (tools/judge/memory.py). `sizes`, when given, receives the inputs' bytes, the
    allocator's peak during the forward, inputs included (0 on cpu), "aliases": which
    output shares memory with an input or parameter, in words, or None, "output_pairs":
    which outputs share memory with one another, and "rng_changed": whether the forward
    changed a global random generator's state. get_inputs and the forward, together, run
    past `timeout_s` (0: no limit) as the file's fault (tools/deadline.py)."""
    path = getattr(mod, "__file__", None) or "problem"
    with Deadline(timeout_s, path, "the reference's get_inputs() and Model.forward(*get_inputs())"):
        return _reference(ref_model, mod, seed, dev, path, init_seed, module_mode, precision, sizes)


def _reference(ref_model, mod, seed, dev, path, init_seed, module_mode, precision, sizes) -> list:
    import torch
    from tools.judge.memory import is_oom, tensor_bytes
    cuda = dev.startswith("cuda")
    if cuda and sizes is not None:
        base = torch.cuda.memory_allocated(dev)
        torch.cuda.reset_peak_memory_stats(dev)
    try:
        inputs = make_inputs(mod, seed, dev)
    except Exception as e:
        if is_oom(e):
            raise
        blame(path, e, "get_inputs()", Step("inputs", dev, seed=seed))
    if sizes is not None:
        sizes["input_bytes"] = tensor_bytes(inputs)
    try:
        rng = rng_states() if sizes is not None else None
        with torch.no_grad(), precision_flags(precision):
            out = ref_model(*inputs)
        if sizes is not None:
            sizes["rng_changed"] = not same_states(rng, rng_states())   # a candidate may draw where Model does
            # tools/judge/ownership.py: an output that is an input has no kernel work
            from tools.sandbox.ownership import overlapping_outputs, shared_memory
            flat = list(out) if isinstance(out, (tuple, list)) else [out]
            # as the worker names a candidate's (tools/sandbox/outputs.py); a namedtuple is a tuple
            sizes["structure"] = f"{'list' if isinstance(out, list) else 'tuple'}:{len(flat)}" \
                if isinstance(out, (tuple, list)) else "tensor"
            tensors = [o for o in flat if type(o) is torch.Tensor]
            shared = shared_memory(tensors, inputs, ref_model, [])
            sizes["aliases"] = shared[0] if shared else None
            sizes["output_pairs"] = overlapping_outputs(tensors)   # Model's own: a candidate may share as it does
        del inputs
        if cuda:
            torch.cuda.synchronize()
    except Exception as e:
        if is_oom(e):
            raise
        blame(path, e, "the reference Model.forward(*get_inputs())",
              Step("forward", dev, seed=seed, init_seed=init_seed, module_mode=module_mode))
    if sizes is not None:
        sizes["peak_bytes"] = torch.cuda.max_memory_allocated(dev) - base if cuda else 0
    if (fault := output_fault(out)) is not None:
        raise BadInput(path, fault)
    return list(out) if isinstance(out, (tuple, list)) else [out]


def check_reproducible(ref_model, mod, seed: int, dev: str, ref: list, settings) -> tuple[str, str] | None:
    """None when the reference, called again on the inputs of `seed` with the RNG seeded
    otherwise, gives `ref` (its outputs for them) again within the trial tolerances of
    `settings` ([eval], a TrialSettings); else the diagnostic (kind, message) every
    candidate then gets: no kernel can match a reference that does not match itself.
    The judge asks once per session (tools/judge/session.py)."""
    import torch
    from tools.judge.memory import is_oom
    from tools.judge.numerics import against_truth, compare, tolerances
    inputs = make_inputs(mod, seed, dev)
    drew: list[bool] = []

    def forward():
        before = _rng_states()
        with torch.no_grad():
            out = ref_model(*inputs)
        if dev.startswith("cuda"):
            torch.cuda.synchronize()
        drew.append(not same_states(_rng_states(), before))
        return out
    try:
        # no other thread seeds the RNG meanwhile; the precision lock first, as the
        # timing takes it before it makes inputs (tools/problem.py as_the_user_has_it)
        with precision_flags(settings.precision):
            out = seeded(forward, seed + _OTHER_SEED)
    except Exception as e:
        if is_oom(e):
            raise
        return ("unreproducible_reference", f"the reference raised {describe_fault(e)} when called "
                "a second time on the same inputs: no kernel can match it")
    del inputs
    again = list(out) if isinstance(out, (tuple, list)) else [out]

    def agrees(k, a, r) -> bool:
        if not isinstance(a, torch.Tensor) or a.shape != r.shape:
            return False
        atol, rtol, rel = tolerances(r.dtype, settings)
        cmp = compare(a, r, atol=atol, rtol=rtol, rel_l2_limit=rel)
        # two roundings of a truth near zero (numerics.py against_truth); never eager's bound
        # (tools/judge/accuracy.py): a random forward's draws are as far from the float64
        # forward's as its first call's
        return against_truth(cmp, a, r, lambda: precise_reference(ref_model, mod, seed, dev), k).ok
    if len(again) == len(ref) and all(agrees(k, a, r) for k, (a, r) in enumerate(zip(again, ref))):
        return None
    dropouts = _random_modules(ref_model)
    if drew[0] or dropouts:
        train = settings.module_mode == "train"
        example = f"; e.g. {', '.join(dropouts)}" if dropouts else ""
        if dropouts:   # eval mode cannot help one random in eval mode
            hint = '; judge inference semantics with [eval] module_mode = "eval" (--set eval.module_mode=eval)' \
                if train else ""
        else:          # the forward's own draw
            hint = "; the forward draws its own random numbers (torch.randn, rand, bernoulli): give them as inputs " \
                "or buffers" + (", or, if it draws them only in training (under `if self.training:`), judge "
                                "inference with --set eval.module_mode=eval" if train else "")
        mode = " in training mode" if train and dropouts else ""
        return ("stochastic_reference", f"the reference is random{mode} (its output changes with the RNG "
                f"seed{example}): no kernel can match it draw for draw{hint}")
    return ("unreproducible_reference", "the reference is not reproducible: called again on the same inputs it "
            "returns other values, beyond the tolerance (state kept between calls, or nondeterministic kernels): "
            "no kernel can match it")


def state_carried(fresh_model, mod, seed: int, dev: str, ref: list, settings) -> bool:
    """Whether a reference that gave other outputs when called again (check_reproducible's
    "unreproducible_reference") keeps state between calls: a model built afresh
    (`fresh_model()`, KernelBench's init) gives `ref`, the first call's outputs on the
    inputs of `seed`, again on its own first call. Nondeterministic kernels would not."""
    import torch
    from tools.judge.numerics import compare, tolerances
    try:
        model = fresh_model()
        again = compute_reference(model, mod, seed, dev, init_seed=settings.init_seed, precision=settings.precision,
                                  module_mode=settings.module_mode, timeout_s=settings.reference_timeout_s)
    except Exception:   # noqa: BLE001 - it did not run again: not shown to carry state
        return False
    finally:
        model = None
    if len(again) != len(ref):
        return False
    for a, r in zip(again, ref):
        if not isinstance(a, torch.Tensor) or a.shape != r.shape or a.dtype != r.dtype:
            return False
        atol, rtol, rel = tolerances(r.dtype, settings)
        if not compare(a, r, atol=atol, rtol=rtol, rel_l2_limit=rel).ok:
            return False
    return True


def sequence_outputs(model, mod, seeds: list[int], dev: str, settings) -> list[list]:
    """A stateful reference as KernelBench calls it: `model`, built afresh, called on the
    inputs of each of `seeds` in turn, its state carried from call to call; the outputs
    of every call, in order."""
    return [compute_reference(model, mod, seed, dev, init_seed=settings.init_seed, precision=settings.precision,
                              module_mode=settings.module_mode, timeout_s=settings.reference_timeout_s)
            for seed in seeds]


def precise_sequence(model, mod, seeds: list[int], dev: str) -> list[list | None]:
    """sequence_outputs in float64: `model`, built afresh for this, made float64 in place,
    its floating tensor attributes widened too (a hidden state kept as a plain tensor), called
    on the widened inputs of each seed in turn. A call that cannot run so (or gives no
    float64 output) is None, and so is every call after it; its outputs as precise_outputs gives them."""
    import torch
    out: list[list | None] = []
    try:
        twin = model.to(torch.float64)
        for m in twin.modules():
            for name, v in list(vars(m).items()):
                if type(v) is torch.Tensor and v.is_floating_point():
                    setattr(m, name, v.to(torch.float64))
    except Exception:   # noqa: BLE001 - no float64 truth: the float32 reference alone decides
        return [None] * len(seeds)
    for seed in seeds:
        got = None
        try:
            inputs = make_inputs(mod, seed, dev)
            wide = [x.to(torch.float64) if isinstance(x, torch.Tensor) and x.is_floating_point() else x
                    for x in inputs]
            with torch.no_grad():
                res = twin(*wide)
            got = _float64_outputs(res)
        except Exception:   # noqa: BLE001 - as precise_outputs
            got = None
        if got is None:
            return out + [None] * (len(seeds) - len(out))
        out.append(got)
    return out


def precise_reference(ref_model, mod, seed: int, dev: str) -> list | None:
    """precise_outputs of the reference Model on the trial inputs of `seed`; None when
    they cannot be made (the float32 reference alone then decides)."""
    try:
        inputs = make_inputs(mod, seed, dev)
    except Exception:   # noqa: BLE001 - out of memory here: no truth, not a fault
        return None
    try:
        return precise_outputs(ref_model, inputs)
    finally:
        del inputs


def precise_outputs(model, inputs: list) -> list | None:
    """`model` (a copy of it: the caller's is left as it is) on `inputs` in float64, floating
    outputs as float64 tensors, None in place of another output (an index beside its values:
    nothing is rounded there); None when the forward cannot run so (an op without a float64
    kernel, a dtype mixed inside the forward, out of memory) or gives no float64 output. The
    copy is made in eval or training mode as `model` is: in training mode a BatchNorm copy
    updates its own running statistics, not the caller's."""
    import copy

    import torch
    try:
        twin = copy.deepcopy(model).to(torch.float64) if isinstance(model, torch.nn.Module) else None
        if twin is None:
            return None
        wide = [x.to(torch.float64) if isinstance(x, torch.Tensor) and x.is_floating_point() else x
                for x in inputs]
        with torch.no_grad(), _float32_made_float64():
            return _float64_outputs(twin(*wide))
    except Exception:   # noqa: BLE001 - no float64 truth: the float32 reference alone decides
        return None


def _float32_made_float64():
    """A torch function mode in which the forward's casts to float32 (`x.float()`, `.to(torch.float32)`,
    `dtype=torch.float32`: a uint8 image made float, a `.float()` before a layer) give float64: the same
    forward, all of it in float64. Without it such a forward mixes dtypes in float64 and has no truth."""
    import torch
    from torch.overrides import TorchFunctionMode

    class Float64(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if func is torch.Tensor.float:
                func, args = torch.Tensor.double, args[:1]
            args = tuple(torch.float64 if a is torch.float32 else a for a in args)
            kwargs = {k: torch.float64 if v is torch.float32 else v for k, v in (kwargs or {}).items()}
            return func(*args, **kwargs)
    return Float64()


def _float64_outputs(res) -> list | None:
    """A float64 forward's outputs as truths: each float64 tensor, None in place of another
    (an integer or bool output, an index beside its values: nothing rounded there); None
    when no output is float64 or one is not a tensor."""
    import torch
    outs = list(res) if isinstance(res, (tuple, list)) else [res]
    if not all(isinstance(o, torch.Tensor) for o in outs):
        return None
    got = [o.detach() if o.dtype == torch.float64 else None for o in outs]
    return got if any(g is not None for g in got) else None


def _rng_states() -> list:
    """Every generator a forward may draw from: torch's (tools/sandbox/state_ops.py
    rng_states: the CPU one, each CUDA device's) and Python's."""
    import random
    return [*rng_states(), random.getstate()]


def _random_modules(model) -> list[str]:
    """The model's dropout modules that drop in its present mode, as "name = Dropout(p=0.5)"."""
    import torch
    found = [f"{name or 'the model'} = {type(m).__name__}(p={m.p:g})" for name, m in model.named_modules()
             if isinstance(m, torch.nn.modules.dropout._DropoutNd) and m.training and m.p > 0]
    return found[:2]
