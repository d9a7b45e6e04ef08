"""Static guards (tools/guards/): what each one rejects, flags, and leaves alone.

Most tests start from one clean Triton candidate and change one line, so a test fails
only for the property its name states. tests/test_exploits.py runs whole candidates
through the evaluator; this file checks the guards alone, in milliseconds.
"""
from __future__ import annotations

import ast
import importlib
import pkgutil
import textwrap

import pytest

from tools import guards
from tools.dialect.portable import portable
from tools.guards import STATIC_GUARDS, Finding, parse_source, run_static_guards
from tools.settings import GuardSettings

STRICT = GuardSettings()
LENIENT = GuardSettings(allow_library_ops=True)

_CLEAN = '''\
import torch
import torch.nn as nn
import triton
import triton.language as tl
{prelude}

@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
{init}

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        relu_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
{forward}
        return out
'''


def candidate(forward: str = "", prelude: str = "", init: str = "") -> str:
    """The clean candidate with extra lines in forward, at module level, in __init__."""
    return _CLEAN.format(prelude=textwrap.dedent(prelude),
                         init=textwrap.indent(textwrap.dedent(init), " " * 8) or "        pass",
                         forward=textwrap.indent(textwrap.dedent(forward), " " * 8))


def found(src: str, settings: GuardSettings = STRICT) -> dict[str, Finding]:
    return {f.guard: f for f in run_static_guards(src, settings)}


def rejected_by(src: str, settings: GuardSettings = STRICT) -> set[str]:
    return {f.guard for f in run_static_guards(src, settings) if f.reject}


# --- the clean baseline -----------------------------------------------------------------

def test_clean_triton_candidate_has_no_findings():
    assert run_static_guards(candidate(), STRICT) == []


def test_empty_like_alone_is_fine():
    src = candidate(forward="out = torch.empty_like(out)")
    assert found(src) == {}


@pytest.mark.parametrize("line", [
    "y = torch.empty((n,), device=x.device, dtype=x.dtype)",
    "y = torch.empty_strided((4, 4), (4, 1), device=x.device)",
    "y = torch.zeros_like(x) + torch.ones(3).shape[0] + torch.full((2,), 1.0).numel()",
    "y = torch.arange(n, device=x.device)",
    "y = torch.tensor([1.0, 2.0])",
    "y = out.view(-1).reshape(x.shape).contiguous().t().transpose(0, 1).permute(1, 0)",
    "y = out.flatten().unsqueeze(0).squeeze(0).expand(n).size(0) + out.stride(0) + out.dim()",
    "y = (out.shape, out.dtype, out.device, out.data_ptr(), out.is_contiguous(), out.element_size())",
    "y = out.to(x.device).float().new_empty((2,))",
    "y = torch.cuda.current_device() if torch.cuda.is_available() else 0",
    "y = triton.cdiv(n, 128) + triton.next_power_of_2(n)",
    "y = math.ceil(math.log2(n)) + max(1, n) + len(x.shape)",
    "y = [d for d in x.shape if d > 1]",
])
def test_allocation_and_metadata_ops_in_forward_are_fine(line):
    assert found(candidate(forward=line, prelude="import math")) == {}


# --- torch doing the work -----------------------------------------------------------------

@pytest.mark.parametrize("line", [
    "out = torch.matmul(x, x)",
    "out = torch.mm(x, x)",
    "out = torch.bmm(x, x)",
    "out = torch.einsum('ij,jk->ik', x, x)",
    "out = torch.softmax(x, dim=1)",
    "out = torch.sum(x, dim=1)",
    "out = torch.exp(x)",
    "out = torch.relu(x)",
    "out = torch.conv2d(x, x)",
    "out = torch.cat([x, x])",
    "out = torch.nn.functional.relu(x)",
    "out = torch.special.expit(x)",
])
def test_torch_compute_op_in_forward_is_rejected(line):
    assert "torch_compute" in rejected_by(candidate(forward=line))


def test_torch_matmul_message_names_the_op_and_suggests_tl_dot():
    f = found(candidate(forward="out = torch.matmul(x, x)"))["torch_compute"]
    assert "torch.matmul" in f.message and "tl.dot" in f.message and "forward" in f.message


def test_functional_op_through_the_F_alias_is_rejected():
    src = candidate(forward="out = F.relu(x)", prelude="import torch.nn.functional as F")
    assert "torch_compute" in rejected_by(src)


def test_functional_op_imported_by_name_is_rejected():
    src = candidate(forward="out = gelu(x)", prelude="from torch.nn.functional import gelu")
    assert "torch_compute" in rejected_by(src)


def test_torch_op_aliased_at_module_level_is_rejected():
    src = candidate(forward="out = fast(x, x)", prelude="fast = torch.matmul")
    assert "torch_compute" in rejected_by(src)


def test_torch_op_stored_on_self_in_init_is_rejected():
    src = candidate(init="self.act = torch.relu", forward="out = self.act(x)")
    assert "torch_compute" in rejected_by(src)


def test_torch_op_kept_as_a_class_attribute_is_rejected():
    src = candidate(forward="out = type(self).op(out)").replace(
        "    def __init__(self):", "    op = torch.relu\n\n    def __init__(self):")
    assert "torch_compute" in rejected_by(src)


def test_torch_reached_through_a_module_that_imports_it_is_rejected():
    assert "torch_compute" in rejected_by(candidate(forward="out = triton.testing.torch.relu(out)"))


def test_naming_a_functional_module_without_calling_into_it_is_fine():
    assert found(candidate(prelude="F = torch.nn.functional")) == {}


def test_torch_op_passed_as_a_value_in_forward_is_rejected():
    src = candidate(forward="out = functools.reduce(torch.add, [x, x])", prelude="import functools")
    assert "torch_compute" in rejected_by(src)


@pytest.mark.parametrize("method", ["matmul(x)", "sum(dim=1)", "softmax(dim=1)", "exp()",
                                    "relu()", "mean()", "bmm(x)", "clamp(min=0)", "max()",
                                    "__matmul__(x)"])
def test_tensor_compute_method_in_forward_is_rejected(method):
    assert "torch_compute" in rejected_by(candidate(forward=f"out = x.{method}"))


def test_literal_getattr_of_a_tensor_compute_method_is_rejected():
    assert "torch_compute" in rejected_by(candidate(forward='out = getattr(x, "relu")()'))


def test_matmul_operator_in_forward_is_rejected():
    assert "torch_compute" in rejected_by(candidate(forward="out = x @ x"))


def test_aten_op_is_rejected():
    assert "torch_compute" in rejected_by(candidate(forward="out = torch.ops.aten.relu.default(x)"))


def test_inductor_extern_kernels_mm_is_rejected():
    src = candidate(forward="extern_kernels.mm(x, x, out=out)",
                    prelude="from torch._inductor.select_algorithm import extern_kernels")
    assert "torch_compute" in rejected_by(src)


def test_calling_an_nn_module_stored_in_init_is_rejected():
    src = candidate(init="self.conv = nn.Conv2d(3, 8, 3)", forward="out = self.conv(x)")
    assert "torch_compute" in rejected_by(src)


def test_calling_an_nn_modules_forward_method_is_rejected():
    src = candidate(init="self.fc = nn.Linear(4, 4)", forward="out = self.fc.forward(x)")
    assert "torch_compute" in rejected_by(src)


def test_using_an_nn_modules_weight_and_bias_is_fine():
    src = candidate(init="self.fc = nn.Linear(4, 4)",
                    forward="w, b = self.fc.weight.t().contiguous(), self.fc.bias")
    assert found(src) == {}


def test_calling_layers_of_a_module_list_in_a_loop_is_rejected():
    src = candidate(init="self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])",
                    forward="for layer in self.layers:\n    out = layer(out)")
    assert "torch_compute" in rejected_by(src)


def test_reading_weights_of_a_module_list_in_a_loop_is_fine():
    src = candidate(init="self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])",
                    forward="ws = [layer.weight for layer in self.layers]")
    assert found(src) == {}


def test_parameter_made_from_a_layers_weight_is_not_a_layer():
    src = candidate(init="self.w = nn.Parameter(nn.Linear(4, 4).weight.detach().clone())",
                    forward="w = self.w.t()")
    assert found(src) == {}


def test_torch_compile_in_init_is_rejected():
    src = candidate(init="self.impl = torch.compile(lambda t: t)", forward="out = self.impl(out)")
    assert "torch_compute" in rejected_by(src)


def test_torch_call_inside_a_jit_kernel_is_rejected():
    src = candidate().replace("    tl.store(out_ptr + offs, tl.maximum(x, 0.0), mask=mask)",
                              "    tl.store(out_ptr + offs, torch.relu(x), mask=mask)")
    assert "torch_compute" in rejected_by(src)


def test_tl_reductions_inside_a_jit_kernel_are_fine():
    src = candidate().replace("    tl.store(out_ptr + offs, tl.maximum(x, 0.0), mask=mask)",
                              "    tl.store(out_ptr + offs, x - tl.max(x, axis=0) + x.sum(axis=0) * 0, mask=mask)")
    assert found(src) == {}


def test_torch_ops_in_init_and_module_setup_are_fine():
    src = candidate(prelude="SCALE = torch.exp(torch.tensor(1.0))",
                    init="""\
                    self.weight = nn.Parameter(torch.randn(4, 4))
                    nn.init.kaiming_uniform_(self.weight, a=5 ** 0.5)
                    self.register_buffer("wt", torch.matmul(self.weight, self.weight).t().contiguous())""")
    assert found(src) == {}


def test_nn_init_in_a_reset_parameters_method_is_fine():
    src = candidate(init="self.weight = nn.Parameter(torch.empty(4, 4))\nself.reset_parameters()")
    src = src.replace("    def forward(self, x):",
                      "    def reset_parameters(self):\n"
                      "        nn.init.kaiming_uniform_(self.weight, a=5 ** 0.5)\n\n"
                      "    def forward(self, x):")
    assert found(src) == {}


def test_own_methods_and_attributes_named_like_torch_ops_are_fine():
    src = candidate(init="self.pad, self.threshold, self.max = 1, 0.5, 3",
                    forward="out = self.relu(out) if self.pad and self.threshold < self.max else out")
    src = src.replace("    def forward(self, x):", "    def relu(self, t):\n        return t\n\n    def forward(self, x):")
    assert found(src) == {}


def test_a_pasted_but_unused_reference_model_and_get_inputs_are_ignored():
    src = candidate() + textwrap.dedent('''
        class Model(nn.Module):
            def forward(self, x):
                return torch.relu(x).sum() @ x


        def get_inputs():
            return [torch.rand(4, 4).abs()]
        ''')
    assert found(src) == {}


UNUSED_DROP_PATH = """
def drop_path(x, p: float = 0.0, training: bool = False):
    return x.div(1 - p)
"""


def test_a_parameter_named_like_an_unused_top_level_function_does_not_keep_it_alive():
    """ConvNeXt's files paste timm's `def drop_path(...)` beside `__init__(self, drop_path=0.)`:
    the parameter is no reference to the function, whose torch code never runs."""
    src = candidate(prelude=UNUSED_DROP_PATH, init="self.p = drop_path")
    src = src.replace("def __init__(self", "def __init__(self, drop_path=0.1")
    assert "def __init__(self, drop_path=0.1" in src and found(src) == {}


@pytest.mark.parametrize("use", ["out = drop_path(out)", "f = [drop_path for _ in range(1)][0]\nout = f(out)"])
def test_a_top_level_function_the_forward_reaches_by_its_global_name_is_still_checked(use):
    src = candidate(prelude=UNUSED_DROP_PATH, forward=use)
    assert "torch_compute" in rejected_by(src)


def test_a_default_value_reads_the_top_level_function_so_it_is_still_checked():
    src = candidate(prelude=UNUSED_DROP_PATH, forward="out = g(out)")
    src = src.replace("    def forward(self, x):", "    def forward(self, x, g=drop_path):")
    assert "torch_compute" in rejected_by(src)


def test_custom_op_of_the_files_own_library_is_not_a_library_op():
    src = candidate(forward='out = torch.ops.krelu.relu(out)',
                    prelude='torch.library.define("krelu::relu", "(Tensor x) -> Tensor")')
    assert "torch_compute" not in found(src)


def test_kernelbook_style_call_with_inductor_helpers_is_fine_in_its_portable_form():
    src = textwrap.dedent('''\
        import torch
        import torch.nn as nn
        import triton
        import triton.language as tl
        from torch._inductor.runtime.triton_heuristics import grid
        from torch._C import _cuda_getCurrentRawStream as get_raw_stream
        from torch._inductor.runtime import triton_helpers
        from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
        assert_size_stride = torch._C._dynamo.guards.assert_size_stride
        empty_strided_cuda = torch._C._dynamo.guards._empty_strided_cuda
        reinterpret_tensor = torch._C._dynamo.guards._reinterpret_tensor


        @triton.jit
        def triton_poi_fused_relu_0(in_ptr0, out_ptr0, xnumel, XBLOCK: tl.constexpr):
            xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:]
            xmask = xindex < xnumel
            tmp0 = tl.load(in_ptr0 + xindex, xmask)
            tmp1 = triton_helpers.maximum(tl.full([1], 0, tl.int32), tmp0)
            tl.store(out_ptr0 + xindex, tl_math.exp(libdevice.log(tmp1)), xmask)


        def call(args):
            primals_1, = args
            args.clear()
            assert_size_stride(primals_1, (4, 4), (4, 1))
            with torch.cuda._DeviceGuard(0):
                torch.cuda.set_device(0)
                buf0 = empty_strided_cuda((4, 4), (4, 1), torch.float32)
                stream0 = get_raw_stream(0)
                triton_poi_fused_relu_0[grid(16)](primals_1, buf0, 16, XBLOCK=16, num_warps=1, num_stages=1)
                del primals_1
            return reinterpret_tensor(buf0, (16,), (1,), 0),


        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()

            def forward(self, input_0):
                output = call([input_0])
                return output[0]
        ''')
    assert found(portable(src)) == {}


def test_kernelbook_imports_of_torchs_private_runtime_are_rejected_as_they_stand():
    src = candidate(prelude="from torch._inductor.runtime.triton_heuristics import grid")
    assert found(src)["private_runtime"].reject


def test_subclassing_a_torch_nn_layer_is_rejected():
    src = candidate().replace("class ModelNew(nn.Module):", "class ModelNew(nn.ReLU):")
    assert "torch_compute" in rejected_by(src)


def test_model_new_bound_to_a_torch_module_is_rejected():
    assert "torch_compute" in rejected_by(candidate() + "\nModelNew = nn.ReLU\n")


@pytest.mark.parametrize("where, line", [
    ("class", "forward = staticmethod(torch.relu)"),
    ("init", "self.forward = torch.relu"),
    ("module", "ModelNew.forward = lambda self, x: x"),
])
def test_replacing_forward_with_another_callable_is_rejected(where, line):
    if where == "class":
        src = candidate().replace("    def __init__(self):", f"    {line}\n\n    def __init__(self):")
    elif where == "init":
        src = candidate(init=line)
    else:
        src = candidate() + f"\n{line}\n"
    f = found(src)["torch_compute"]
    assert f.reject and "forward" in f.message


def test_torch_op_kept_in_a_table_at_import_is_rejected():
    src = candidate(prelude='OPS = {"act": torch.relu}', forward='out = OPS["act"](out)')
    assert "torch_compute" in rejected_by(src)


def test_numpy_round_trip_in_forward_is_rejected():
    src = candidate(prelude="import numpy as np", forward="out = torch.from_numpy(np.maximum(np.asarray(out), 0))")
    assert "torch_compute" in rejected_by(src)


def test_numpy_for_shape_arithmetic_is_fine():
    src = candidate(prelude="import numpy as np", forward="total = int(np.prod(x.shape))")
    assert found(src) == {}


def test_library_ops_are_flag_only_when_allowed():
    f = found(candidate(forward="out = torch.matmul(x, x)"), LENIENT)["torch_compute"]
    assert not f.reject and f.flag == "library_ops"


def test_library_ops_are_rejected_by_default():
    f = found(candidate(forward="out = torch.matmul(x, x)"))["torch_compute"]
    assert f.reject and f.flag == "library_ops"


# --- host-side work in the forward path ----------------------------------------------------

@pytest.mark.parametrize("line", [
    "v = x.tolist()",
    "v = x.numpy()",
    "v = out[0].item()",
    "v = x.cpu()",
    "v = x.to('cpu')",
    "v = x.to(device='cpu')",
    "v = x.to(torch.device('cpu'), non_blocking=True)",
    "v = x.untyped_storage()",
    "v = x.storage()",
    "v = x.__array__()",
    "v = np.asarray(x)",
    "v = np.frombuffer(bytes(x.untyped_storage()), dtype=np.float32)",
    "v = memoryview(x)",
    "v = bytes(x)",
    "v = float(x[0])",
    "v = int(out.view(-1)[0])",
    "v = math.exp(x[0])",
    "v = torch.Tensor.tolist(x)",
    'v = getattr(x, "tolist")()',
    "f = x.tolist",
    "y = torch.empty(n, device='cpu')",
])
def test_host_conversion_in_forward_is_rejected(line):
    src = candidate(forward=line, prelude="import math\nimport numpy as np")
    assert "host_transfer" in rejected_by(src, LENIENT)


def test_host_transfer_finding_asks_to_keep_the_work_on_the_device():
    f = found(candidate(forward="v = x.tolist()"))["host_transfer"]
    assert f.reject and f.flag == "host_compute" and "device" in f.message and "Triton" in f.message


def test_host_conversion_in_a_forward_helper_is_rejected():
    src = candidate(prelude="def to_host(t):\n    return t.tolist()", forward="v = to_host(x)")
    assert "host_transfer" in rejected_by(src)


def test_host_conversion_in_init_and_at_module_level_is_fine():
    src = candidate(prelude="import numpy as np\nTABLE = np.arange(4).tolist()",
                    init="w = np.ones((2, 2), dtype=np.float32)\n"
                         "self.w = nn.Parameter(torch.from_numpy(np.asarray(w)).cpu())\n"
                         "self.n = int(self.w[0, 0].item())")
    assert "host_transfer" not in found(src)


@pytest.mark.parametrize("line", [
    "v = int(x.shape[0]) + x.size(0) + x.numel() + x.stride(0) + x.dim()",
    "v = x.data_ptr() + 4 * x.element_size()",
    "v = float(n) + int(n // 2) + math.ceil(n / 128) + math.log2(max(n, 1))",
    "v = out.to(x.device).to(torch.float32).to(dtype=x.dtype)",
    "v = x.device.type == 'cpu'",
    "v = [int(s) for s in x.shape]",
    "v = self.cpu_count",
])
def test_shape_pointer_and_device_arithmetic_in_forward_is_fine(line):
    assert "host_transfer" not in found(candidate(forward=line, prelude="import math", init="self.cpu_count = 1"))


# --- disguises --------------------------------------------------------------------------

def test_disguised_getattr_matmul_is_rejected():
    src = candidate(forward='out = getattr(torch, "mat" + "mul")(x, x)')
    assert "disguise" in rejected_by(src)


def test_disguises_stay_rejected_when_library_ops_are_allowed():
    src = candidate(forward='out = getattr(torch, "mat" + "mul")(x, x)')
    assert "disguise" in rejected_by(src, LENIENT)


def test_getattr_with_a_computed_name_on_a_tensor_is_rejected():
    src = candidate(forward='name = "re" + "lu"\nout = getattr(x, name)()')
    assert "disguise" in rejected_by(src)


def test_getattr_on_self_for_own_parameters_is_fine():
    src = candidate(init='self.w0 = nn.Parameter(torch.ones(2))', forward='w = getattr(self, f"w{0}")')
    assert found(src) == {}


def test_getattr_on_self_is_a_disguise_when_the_module_holds_nn_layers():
    src = candidate(init="self.fc = nn.Linear(4, 4)", forward='out = getattr(self, "f" + "c")(x)')
    assert "disguise" in rejected_by(src)


@pytest.mark.parametrize("line", [
    'out = eval("torch.relu")(x)',
    'exec("import torch")',
    'code = compile("1", "f", "eval")',
    'm = __import__("torch")',
    'f = torch.__dict__["relu"]',
    'f = vars(torch)["relu"]',
    'f = globals()["torch"].relu',
    'f = operator.attrgetter("relu")(torch)',
    'f = pickle.loads(b"")',
    'f = pydoc.locate("torch.relu")',
    'f = functools.reduce(getattr, ["relu"], torch)',
])
def test_dynamic_code_and_lookups_are_rejected(line):
    src = candidate(forward=line, prelude="import operator\nimport pickle\nimport pydoc\nimport functools")
    assert "disguise" in rejected_by(src)


@pytest.mark.parametrize("line", [
    'f = string.Formatter().get_field("0.relu", [torch], {})[0]',
    'f = typing.get_type_hints(ModelNew)',
    'f = timeit.timeit("1")',
])
def test_resolvers_of_dotted_names_and_code_strings_are_rejected(line):
    src = candidate(forward=line, prelude="import string\nimport typing\nimport timeit")
    assert "disguise" in rejected_by(src)


@pytest.mark.parametrize("line", ['m = "0.apply_"', 'm = "torch.Tensor.numpy"', 'm = "{0.__base__.tolist}"',
                                  'm = "x.map_"'])
def test_a_string_naming_an_attribute_path_through_a_refused_name_is_rejected(line):
    assert "disguise" in rejected_by(candidate(forward=line))


def test_a_string_annotation_naming_a_refused_attribute_path_is_rejected():
    src = candidate(prelude='class Holder:\n    m: "torch.Tensor.apply_"')
    assert "disguise" in rejected_by(src)


@pytest.mark.parametrize("line", ['k = "conv.weight"', 'k = "layers.0.norm.bias"', 'k = "torch.float32"',
                                  'k = "{0.shape}"', 'k = "call x.numpy() on the host"', 'k = "numpy"'])
def test_ordinary_strings_with_dots_are_fine(line):
    assert "disguise" not in rejected_by(candidate(forward=line))


@pytest.mark.parametrize("line", ["v = x._version", 'v = getattr(x, "_version")'])
def test_reading_a_tensors_version_counter_is_rejected(line):
    assert "disguise" in rejected_by(candidate(forward=line))


def test_importlib_is_rejected():
    assert "disguise" in rejected_by(candidate(prelude="import importlib"))


def test_star_import_from_torch_is_rejected():
    assert "disguise" in rejected_by(candidate(prelude="from torch.nn.functional import *"))


# --- try/except fallback ----------------------------------------------------------------

def test_try_except_falling_back_to_other_code_is_rejected():
    src = candidate(forward="try:\n    out = out + 0\nexcept Exception:\n    out = x * (x > 0)")
    f = found(src)["fallback"]
    assert f.reject and f.line is not None


def test_try_except_returning_in_the_handler_is_rejected():
    src = candidate(forward="try:\n    pass\nexcept RuntimeError:\n    return x")
    assert "fallback" in rejected_by(src)


def test_return_in_finally_swallowing_errors_is_rejected():
    src = candidate(forward="try:\n    out = out + 0\nfinally:\n    return out")
    assert "fallback" in rejected_by(src)


def test_optional_import_at_module_level_is_fine():
    src = candidate(prelude="try:\n    from triton.language.extra import libdevice\n"
                            "except ImportError:\n    libdevice = None")
    assert found(src) == {}


def test_try_except_that_only_reraises_is_fine():
    src = candidate(forward="try:\n    n = int(n)\nexcept ValueError as e:\n    raise RuntimeError('bad n') from e")
    assert found(src) == {}


# --- the reference Model ----------------------------------------------------------------

def test_subclassing_the_reference_model_is_rejected():
    src = candidate().replace("class ModelNew(nn.Module):", "class ModelNew(Model):")
    assert "reference_model" in rejected_by(src)


def test_calling_the_reference_model_is_rejected():
    assert "reference_model" in rejected_by(candidate(forward="out = Model()(x)"))


def test_importing_the_reference_model_is_rejected():
    assert "reference_model" in rejected_by(candidate(prelude="from problem import Model"))


# --- monkeypatching and introspection ----------------------------------------------------

@pytest.mark.parametrize("prelude", [
    "torch.allclose = lambda *a, **k: True",
    "time.perf_counter = lambda: 0.0",
    "torch.cuda.Event.elapsed_time = lambda self, end: 0.001",
    "torch.cuda.synchronize = lambda *a: None",
    "triton.runtime.jit.JITFunction.run = lambda *a, **k: None",
    'setattr(torch, "matmul", None)',
    'setattr(type(torch.empty(1)), "__add__", None)',
    'sys.modules["torch"] = None',
    "T = torch\nT.relu = None",
    'os.environ["TRITON_INTERPRET"] = "0"',
    "del torch.cuda.Event",
    "import tools.sandbox.worker",
    "from agent.loop import graph",
    "import krefine",
    "import candidate",
    "import ctypes",
    "import builtins",
    "objs = gc.get_objects()",
    "frame = sys._getframe(1)",
    "frame = inspect.currentframe().f_back",
    "import signal",
    "b = __builtins__",
    # regression: these three once fell into a comment in the tamper list
    "import atexit\natexit.register(print)",
    "import resource\nresource.setrlimit(resource.RLIMIT_FSIZE, (-1, -1))",
    "from torch.overrides import TorchFunctionMode",
])
def test_monkeypatching_and_harness_access_are_rejected(prelude):
    src = candidate(prelude="import time\nimport sys\nimport os\nimport gc\nimport inspect\n" + prelude)
    assert "monkeypatch" in rejected_by(src)


def test_defining_torch_function_interception_is_rejected():
    src = candidate(prelude="class T(torch.Tensor):\n    @classmethod\n"
                            "    def __torch_function__(cls, func, types, args=(), kwargs=None):\n"
                            "        return func(*args)")
    assert "monkeypatch" in rejected_by(src)


def test_overriding_an_aten_op_with_torch_library_is_rejected():
    src = candidate(prelude='_lib = torch.library.Library("aten", "IMPL")')
    assert "monkeypatch" in rejected_by(src)


def test_setting_attributes_on_self_and_plain_objects_is_fine():
    src = candidate(init="self.cfg = {}\nself.cfg['block'] = 1024\nsetattr(self, 'n_calls', 0)")
    assert found(src) == {}


@pytest.mark.parametrize("prelude", [
    "import threading\nthreading.setprofile(None)",
    "import threading\nthreading.settrace(None)",
    "import threading\nthreading.setprofile_all_threads(None)",
    "import sys\nsys.monitoring.use_tool_id(0, 'x')",
    "import sys\nsys.setswitchinterval(1.0)",
    "import sys\non = sys.getprofile() is not None",
    "from torch.profiler import profile",
    "import torch.autograd.profiler as p",
    "on = torch.autograd._profiler_enabled()",
    "on = torch._C._autograd._profiler_enabled()",
    "from torch._C import _profiler",
    "g = torch._C._DisableTorchDispatch()",
])
def test_detecting_or_switching_the_judges_profiler_and_tracers_is_rejected(prelude):
    assert "monkeypatch" in rejected_by(candidate(prelude=prelude))


@pytest.mark.parametrize("prelude", [
    "from logging.handlers import QueueListener",
    "import logging.config\nlogging.config.listen(9000)",
    "import faulthandler\nfaulthandler.dump_traceback_later(1.0)",
    "from torch.utils.data import DataLoader",
])
def test_stdlib_and_torch_helpers_that_start_threads_are_rejected(prelude):
    assert "concurrency" in rejected_by(candidate(prelude=prelude))


# --- modules reached through other modules' attributes -------------------------------------

@pytest.mark.parametrize("prelude", [
    'm = os.sys.modules["torch.utils._python_dispatch"]',
    "os.sys.setprofile(None)",
    "os.sys.settrace(None)",
    "f = os.sys._getframe(1)",
    "typing.sys.settrace(None)",
    "f = numpy.sys._getframe(0)",
    "torch.os.putenv('TRITON_INTERPRET', '0')",
    "posixpath.os.sys.modules.clear()",
])
def test_tampering_reached_through_another_modules_attribute_is_rejected(prelude):
    src = candidate(prelude="import os\nimport typing\nimport numpy\nimport posixpath\n" + prelude)
    assert "monkeypatch" in rejected_by(src)


def test_tampering_through_an_alias_of_a_module_that_holds_sys_is_rejected():
    assert "monkeypatch" in rejected_by(candidate(prelude="import os as o\nf = o.sys._getframe(1)"))


@pytest.mark.parametrize("prelude", [
    "from os import sys as s\nf = s._getframe(1)",
    "from torch import os as tos\ntos.putenv('A', '1')",
    "import os.path\nf = os.path.os.sys._getframe(1)",
])
def test_a_module_imported_from_another_module_is_read_as_itself(prelude):
    assert "monkeypatch" in rejected_by(candidate(prelude=prelude))


def test_threads_reached_through_another_modules_attribute_are_rejected():
    assert "concurrency" in rejected_by(candidate(prelude="import logging\nt = logging.threading.Thread"))


def test_sys_behind_a_module_the_judge_has_not_loaded_is_still_read_as_sys():
    src = candidate(prelude="import not_a_loaded_pkg\nf = not_a_loaded_pkg.sys._getframe(1)")
    assert "monkeypatch" in rejected_by(src)


def test_reading_a_module_through_torch_is_not_a_torch_op():
    assert "torch_compute" not in found(candidate(forward="s = torch.os.path.join('a', 'b')"))


def test_guards_import_no_module_the_candidate_names():
    import sys
    assert "this" not in sys.modules   # `import this` prints the Zen of Python: a side effect
    run_static_guards(candidate(prelude="import this\nz = this.s.upper"), STRICT)
    assert "this" not in sys.modules


def test_every_path_in_the_guard_tables_is_spelled_as_the_walk_reads_it():
    # a table entry the walk renames (os.path.join reads as posixpath.join) would never match
    from tools.guards import escapes, flags, tampering, torch_ops
    from tools.guards.modules import canonical
    for mod in (escapes, flags, tampering, torch_ops):
        for name, table in vars(mod).items():
            if isinstance(table, (tuple, frozenset)) and table and all(isinstance(p, str) for p in table):
                for p in (p.rstrip("*").rstrip(".") for p in table if "." in p):
                    assert canonical(p)[0] == p, (mod.__name__, name, p)


# --- indirect setattr, delattr and getattr -------------------------------------------------

@pytest.mark.parametrize("helper", [
    "def patch(obj, name, fn):\n    setattr(obj, name, fn)\npatch(torch, 'mm', None)",
    "def patch(obj, name):\n    delattr(obj, name)\npatch(torch, 'allclose')",
    "def patch(self, name, fn):\n    setattr(self, name, fn)\npatch(torch, 'mm', None)",
    "class Patcher:\n    @staticmethod\n    def patch(self, fn):\n        setattr(self, 'mm', fn)\n"
    "Patcher.patch(torch, None)",
])
def test_setattr_on_anything_but_the_candidates_own_objects_is_rejected(helper):
    assert "monkeypatch" in rejected_by(candidate(prelude=helper))


def test_attribute_store_through_a_helpers_parameter_is_rejected():
    assert "monkeypatch" in rejected_by(candidate(prelude="def patch(m):\n    m.allclose = None\npatch(torch)"))


def test_attribute_store_on_a_call_result_is_rejected():
    assert "monkeypatch" in rejected_by(candidate(prelude="type(torch.empty(1)).relu = None"))


def test_attribute_store_into_any_imported_module_is_rejected():
    assert "monkeypatch" in rejected_by(candidate(prelude="import functools\nfunctools.reduce = None"))


@pytest.mark.parametrize("prelude", [
    "getattr(object, '__setattr__')(torch, 'mm', None)",
    "setattr.__call__(torch, 'mm', None)",
    "type.__setattr__(torch.Tensor, 'relu', None)",
])
def test_setattr_reached_by_other_spellings_is_rejected(prelude):
    src = candidate(prelude=prelude)
    assert {"monkeypatch", "disguise"} & rejected_by(src)


def test_setattr_on_own_instances_and_classes_and_autograd_ctx_is_fine():
    src = candidate(prelude=textwrap.dedent('''\
        class Cfg:
            pass


        CFG = Cfg()
        setattr(CFG, "block", 1024)
        setattr(Cfg, "warps", 4)


        class Scale(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.n = x.numel()
                return x
        '''), init="for i in range(2):\n    setattr(self, f'w{i}', nn.Parameter(torch.ones(2)))")
    assert found(src) == {}


@pytest.mark.parametrize("line", [
    'w = getattr(self.lib, "re" + "lu")',
    'w = getattr(type(self), "re" + "lu")',
])
def test_getattr_with_a_computed_name_on_anything_but_self_is_rejected(line):
    assert "disguise" in rejected_by(candidate(init="self.lib = torch", forward=line))


def test_getattr_with_a_computed_name_on_a_plain_functions_self_parameter_is_rejected():
    src = candidate(prelude="def look(self, name):\n    return getattr(self, name)",
                    forward='f = look(torch, "re" + "lu")')
    assert "disguise" in rejected_by(src)


@pytest.mark.parametrize("prelude", [
    "def use(m):\n    return m\nuse(torch)",
    "MODS = {'t': torch}",
    "for m in [os.sys]:\n    pass",
    "def lib():\n    return os\nL = lib()",
    "f = functools.partial(print, torch)",
])
def test_a_module_handed_on_as_a_value_is_rejected(prelude):
    src = candidate(prelude="import os\nimport functools\n" + prelude)
    assert "disguise" in rejected_by(src)


def test_binding_or_probing_a_module_by_name_is_fine():
    src = candidate(prelude="T = torch\nHAS_FMA = hasattr(tl, 'fma')\nimport triton.language as tl2",
                    init="self.lib = tl2")
    assert found(src) == {}


# --- threads, processes, streams, network, files, other toolkits ---------------------------

@pytest.mark.parametrize("prelude, guard", [
    ("import threading", "concurrency"),
    ("from concurrent.futures import ThreadPoolExecutor", "concurrency"),
    ("import multiprocessing", "concurrency"),
    ("import asyncio", "concurrency"),
    ("import subprocess", "concurrency"),
    ("import _thread", "concurrency"),
    ("import os\nos.system('true')", "concurrency"),
    ("import os\npid = os.fork()", "concurrency"),
    ("from os import popen", "concurrency"),
    ("import torch.multiprocessing", "concurrency"),
    ("import socket", "network"),
    ("import urllib.request", "network"),
    ("import requests", "network"),
    ("from http.client import HTTPConnection", "network"),
    ("import torch.distributed as dist", "network"),
    ("s = torch.cuda.Stream()", "side_stream"),
    ("torch.cuda.set_stream(None)", "side_stream"),
    ("s = torch.cuda.ExternalStream(0)", "side_stream"),
    ("from torch.cuda import stream", "side_stream"),
    ("g = torch.cuda.CUDAGraph()", "side_stream"),
    ("torch.cuda.current_stream().wait_stream(None)", "side_stream"),
    ("from torch.utils.cpp_extension import load_inline", "foreign_kernel"),
    ("import cupy", "foreign_kernel"),
    ("import numba.cuda", "foreign_kernel"),
    ("from scipy.special import expit", "foreign_kernel"),
])
def test_threads_processes_streams_network_and_other_toolkits_are_rejected(prelude, guard):
    assert guard in rejected_by(candidate(prelude=prelude))


def test_side_stream_context_in_forward_is_rejected():
    src = candidate(forward="with torch.cuda.stream(torch.cuda.Stream()):\n    out = out + 0")
    assert "side_stream" in rejected_by(src)


def test_current_stream_is_fine():
    assert found(candidate(forward="s = torch.cuda.current_stream()")) == {}


@pytest.mark.parametrize("line", [
    'f = open("/tmp/answers.bin", "wb")',
    'f = open("answers.txt", "w")',
    'f = open("log.txt", "a")',
    'f = open("/etc/passwd")',
    'f = open("../problem.py")',
    'f = open(name)',
    'f = open(3, "w")',
    'os.write(5, b"{}")',
    'os.remove("/tmp/x")',
    'os.makedirs("/tmp/cache")',
    'shutil.rmtree("cache")',
    'pathlib.Path("x.txt").write_text("1")',
    'pathlib.Path("x.txt").unlink()',
    'torch.save(out, "/tmp/out.pt")',
])
def test_file_writes_and_paths_outside_the_temp_dir_are_rejected(line):
    src = candidate(forward=f"name = 'x'\n{line}", prelude="import os\nimport shutil\nimport pathlib")
    assert "filesystem" in rejected_by(src)


def test_a_parameter_named_like_a_builtin_does_not_hide_that_builtin_elsewhere():
    src = candidate(prelude="def helper(open):\n    return open", forward='f = open("/tmp/x", "w")')
    assert "filesystem" in rejected_by(src)


def test_reading_a_relative_file_and_making_a_relative_dir_are_fine():
    src = candidate(forward='os.makedirs("cache", exist_ok=True)\ncfg = open("cfg.json").read()',
                    prelude="import os")
    assert found(src) == {}


# --- a Triton kernel must exist -------------------------------------------------------------

def test_file_without_a_triton_kernel_is_rejected():
    src = "import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n" \
          "    def forward(self, x):\n        return x * (x > 0)\n"
    f = found(src)["no_triton_kernel"]
    assert f.reject and f.flag == "no_triton_kernel"


def test_a_kernel_made_by_calling_triton_jit_counts():
    src = candidate().replace("@triton.jit\ndef relu_kernel", "def _relu_kernel")
    src = src.replace("class ModelNew", "relu_kernel = triton.jit(_relu_kernel)\n\n\nclass ModelNew")
    assert "no_triton_kernel" not in found(src)


def test_a_kernel_decorated_through_an_alias_counts():
    src = candidate(prelude="from triton import jit").replace("@triton.jit", "@jit")
    assert "no_triton_kernel" not in found(src)


# --- reaching tensor memory, the judge or the dispatcher around the wrappers (issue 32) -------

@pytest.mark.parametrize("prelude, forward", [
    ('import pathlib', 'b = pathlib.Path("/proc/self/mem").read_bytes()'),
    ('import os', 'b = open(os.path.join("/", "proc", str(os.getpid()), "mem"), "rb")'),
    ('', 'b = open(f"/proc/{n}/map_files/x", "rb")'),
    ('class V:\n    @property\n    def __array_interface__(self):\n        return {}', ''),
    ('', 'v = type("V", (), {"__array_struct__": 1})'),
    ('', 'st = x.__reduce_ex__(2)'),
    ('import io', 'S.__reduce__()'),
    ('S = None', 'S._write_file(buf, False, False, 4)'),
    ('import copyreg', ''),
    ('import pickle as p', ''),
    ('import mmap', ''),
    ('', 'v = torch.from_file("a.bin", True, 16)'),
    ('import numpy as np', 'v = np.memmap("a.bin")'),
    ('from numpy import ctypeslib', ''),
])
def test_what_reaches_tensor_memory_around_the_wrappers_is_a_host_read_anywhere(prelude, forward):
    f = found(candidate(prelude=prelude, forward=forward))["host_transfer"]
    assert f.reject and f.flag == "host_compute"


def test_a_process_memory_file_is_also_a_filesystem_finding():
    src = candidate(prelude="import pathlib", forward='b = pathlib.Path("/proc/self/mem").open("rb")')
    assert {"host_transfer", "filesystem"} <= rejected_by(src)


def test_a_docstring_that_names_proc_or_dunders_is_not_code():
    src = candidate(prelude='"""Reads nothing from /proc/self/mem and defines no __array_interface__."""')
    assert found(src) == {}


@pytest.mark.parametrize("prelude", [
    'lib = torch.library.Library(NS, "IMPL")',
    'from torch.library import custom_op',
    '@torch.library.custom_op("mine::relu", mutates_args=())\ndef f(x: torch.Tensor) -> torch.Tensor:\n    return x',
    'torch.ops.load_library("libx.so")',
    'torch.ops.aten.relu.default.py_impl(1)(print)',
])
def test_registering_operators_in_any_namespace_is_rejected_as_library_ops(prelude):
    f = found(candidate(prelude=prelude))["op_registration"]
    assert f.reject and f.flag == "library_ops"


@pytest.mark.parametrize("prelude", [
    "import inspect", "from inspect import getclosurevars", "v = print.__closure__",
    "v = print.__wrapped__", "v = print.__defaults__", "import traceback\nv = traceback.walk_tb(None)",
    "v = (lambda: 0).__code__", "import sys\nv = sys.exc_info()", "v = getattr(print, 'cell_contents', None)",
])
def test_introspection_that_reaches_the_judges_objects_is_monkeypatch(prelude):
    assert found(candidate(prelude=prelude))["monkeypatch"].reject


def test_reading_a_closure_cell_is_monkeypatch():
    assert "monkeypatch" in rejected_by(candidate(forward="v = out.cell_contents"))


# --- flag-only hints ----------------------------------------------------------------------

@pytest.mark.parametrize("line", ["out = out.half()", "out = out.to(torch.float16)", "out = out.bfloat16()"])
def test_half_precision_casts_are_flagged_not_rejected(line):
    f = found(candidate(forward=line))["reduced_precision"]
    assert not f.reject and f.flag == "reduced_precision"


def test_fp16_cast_inside_the_kernel_is_flagged():
    src = candidate().replace("x = tl.load(x_ptr + offs, mask=mask)", "x = tl.load(x_ptr + offs, mask=mask).to(tl.float16)")
    assert "reduced_precision" in found(src)


def test_tf32_dot_is_flagged_and_ieee_dot_is_not():
    tf32 = candidate().replace("tl.maximum(x, 0.0)", 'tl.dot(x, x, input_precision="tf32")')
    ieee = candidate().replace("tl.maximum(x, 0.0)", 'tl.dot(x, x, input_precision="ieee")')
    assert "reduced_precision" in found(tf32)
    assert "reduced_precision" not in found(ieee)


def test_tf32x3_dot_keeps_fp32_accuracy_and_is_not_flagged():
    src = candidate().replace("tl.maximum(x, 0.0)", 'tl.dot(x, x, input_precision="tf32x3")')
    assert "reduced_precision" not in found(src)


def test_a_dot_with_no_precision_is_flagged_as_tf32_on_a_gpu_not_rejected():
    f = found(candidate().replace("tl.maximum(x, 0.0)", "tl.dot(x, x)"))["reduced_precision"]
    assert not f.reject and "TF32" in f.message and "tf32x3" in f.message and "ieee" in f.message


def test_a_dot_whose_precision_is_a_constexpr_bound_in_the_kernel_is_read_through_it():
    exact = candidate().replace("tl.maximum(x, 0.0)", "tl.dot(x, x, allow_tf32=ALLOW_TF32)").replace(
        "    x = tl.load(", "    ALLOW_TF32: tl.constexpr = False\n    x = tl.load(")
    assert "reduced_precision" not in found(exact)
    assert "reduced_precision" in found(exact.replace("= False", "= True"))


def test_the_reduced_precision_flag_says_the_precision_policy_decides_and_names_tf32x3():
    f = found(candidate().replace("tl.maximum(x, 0.0)", 'tl.dot(x, x, input_precision="tf32")'))["reduced_precision"]
    assert "precision policy decides" in f.message and 'input_precision="tf32x3"' in f.message and "will fail" not in f.message


def test_output_cache_keyed_by_shape_is_flagged_not_rejected():
    src = candidate(init="self.cache = {}",
                    forward="key = tuple(x.shape)\nif key in self.cache:\n    return self.cache[key]\nself.cache[key] = out")
    f = found(src)["caching"]
    assert not f.reject and f.flag == "caching"
    assert not rejected_by(src)


def test_output_cache_keyed_by_data_ptr_is_flagged():
    src = candidate(init="self.cache = {}", forward="self.cache[x.data_ptr()] = out")
    assert "caching" in found(src)


def test_returning_a_tensor_kept_on_self_is_flagged():
    src = candidate(init="self.last = None", forward="prev = self.last\nself.last = out\nif prev is not None:\n    return prev")
    assert "caching" in found(src)


def test_functools_cache_on_a_helper_is_flagged():
    src = candidate(prelude="import functools\n\n@functools.lru_cache(maxsize=None)\ndef helper(n):\n    return n")
    assert "caching" in found(src)


def test_lazily_cached_weight_layout_is_not_flagged():
    src = candidate(init="self.w = nn.Parameter(torch.ones(4, 4))\nself._wt = None",
                    forward="if self._wt is None:\n    self._wt = self.w.t().contiguous()")
    assert found(src) == {}


# --- the guard machinery -----------------------------------------------------------------

# one source per guard that should fire it; the test below matches them by behaviour,
# never by name, and fails if a guard in STATIC_GUARDS is never fired
_TRIGGERS = [
    candidate(forward="out = torch.matmul(x, x)"),
    candidate(forward='out = eval("x")'),
    candidate(forward="try:\n    pass\nexcept Exception:\n    return x"),
    candidate(forward="out = Model()(x)"),
    candidate(prelude="torch.allclose = None"),
    candidate(prelude="import threading"),
    candidate(prelude="import socket"),
    candidate(prelude="s = torch.cuda.Stream()"),
    candidate(prelude="import cupy"),
    candidate(forward='open("/tmp/x", "w")'),
    "import torch\n\nclass ModelNew(torch.nn.Module):\n    pass\n",
    candidate(forward="out = out.half()"),
    candidate(init="self.c = {}", forward="self.c[x.data_ptr()] = out"),
    candidate(forward="v = x.tolist()"),
    candidate(prelude="from torch._inductor.runtime.hints import DeviceProperties"),
    candidate(prelude='lib = torch.library.Library(NS, "IMPL")'),
    candidate(prelude="import triton.knobs"),
]


def test_every_guard_in_the_tuple_runs_and_fires_on_its_trigger():
    # a guard misspelled or dropped from STATIC_GUARDS cannot go quiet unnoticed:
    # each one must fire on some trigger, and run_static_guards must report what it found
    for guard in STATIC_GUARDS:
        fired = False
        for src in _TRIGGERS:
            finding = guard(parse_source(src), STRICT)
            if finding is not None:
                fired = True
                assert finding in run_static_guards(src, STRICT), (guard.__name__, finding)
        assert fired, f"{guard.__name__} fired on no trigger"


def test_every_check_function_in_the_guard_modules_is_in_the_tuple():
    modules = [importlib.import_module(f"tools.guards.{m.name}") for m in pkgutil.iter_modules(guards.__path__)]
    defined = {v for mod in modules for k, v in vars(mod).items() if k.startswith("check_") and callable(v)}
    assert defined == set(STATIC_GUARDS)


def test_source_that_does_not_parse_gets_no_findings():
    assert run_static_guards("def broken(:\n    torch.matmul(a, b)\n", STRICT) == []


def test_findings_carry_the_line_of_the_offending_code():
    src = candidate(forward="out = torch.matmul(x, x)")
    line = next(i for i, text in enumerate(src.splitlines(), 1) if "torch.matmul" in text)
    assert found(src)["torch_compute"].line == line


def test_rejecting_findings_come_before_flags():
    src = candidate(forward="out = out.half()\nout = torch.matmul(out, out)")
    findings = run_static_guards(src, STRICT)
    assert [f.reject for f in findings] == sorted((f.reject for f in findings), reverse=True)
    assert findings[0].reject and not findings[-1].reject


def test_dot_precisions_count_each_tl_dot_by_its_precision():
    import ast
    from tools.precision import dot_precisions
    src = ('acc = tl.dot(a, b)\nacc = tl.dot(a, b, input_precision="tf32x3")\n'
           'acc = tl.dot(a, b, allow_tf32=False)\nacc = tl.dot(a, b, input_precision="tf32")\n')
    assert dot_precisions(ast.parse(src)) == {"default": 1, "tf32x3": 1, "ieee": 1, "tf32": 1}


def test_the_verdicts_checks_report_the_dot_precision_used():
    from tools.judge.record import Evaluation
    from tools.judge.static import static_checks
    from tools.settings import EvalSettings
    src = candidate().replace("tl.maximum(x, 0.0)", 'tl.dot(x, x, input_precision="tf32x3")')
    run = Evaluation(None, src, "cpu", 0, EvalSettings(), None)
    static_checks(run, "candidate.py")
    assert run.checks["dot_precision"] == {"tf32x3": 1}


def test_the_verdicts_checks_say_a_dot_with_no_precision_runs_as_tf32_on_a_gpu():
    from tools.judge.record import Evaluation
    from tools.judge.static import static_checks
    from tools.settings import EvalSettings
    src = candidate().replace("tl.maximum(x, 0.0)", 'tl.dot(x, x) + tl.dot(x, x, input_precision="tf32") + '
                              'tl.dot(x, x, input_precision="ieee")')
    run = Evaluation(None, src, "cpu", 0, EvalSettings(), None)
    static_checks(run, "candidate.py")
    assert run.checks["dot_precision"] == {"default": 1, "tf32": 1, "ieee": 1}
    assert run.checks["dot_precision_on_gpu"] == {"tf32": 2, "ieee": 1}


# --- methods only __init__ calls are set-up --------------------------------------------

def _with_method(method: str, init: str = "", forward: str = "") -> str:
    """The clean candidate with one more method of ModelNew (its text at class level)."""
    return candidate(init=init, forward=forward) + textwrap.indent(textwrap.dedent(method), " " * 4)


_MAKE_LAYER = '''
def _make_layer(self, n):
    return nn.Sequential(*[nn.Conv2d(4, 4, 3) for _ in range(n)])
'''


def test_a_method_only_init_calls_may_build_torch_modules():
    assert "torch_compute" not in rejected_by(_with_method(_MAKE_LAYER, init="self.layer = self._make_layer(2)"))


def test_a_method_init_and_forward_both_call_is_on_the_forward_path():
    src = _with_method("def _act(self, x):\n    return torch.relu(x)\n", init="self._act(torch.ones(1))",
                       forward="out = self._act(out)")
    assert "torch_compute" in rejected_by(src)


def test_a_method_a_lambda_in_init_calls_is_on_the_forward_path():
    src = _with_method("def _act(self, x):\n    return torch.relu(x)\n", init="self.f = lambda x: self._act(x)",
                       forward="out = self.f(out)")
    assert "torch_compute" in rejected_by(src)


def test_a_method_init_stores_without_calling_is_on_the_forward_path():
    src = _with_method("def _act(self, x):\n    return torch.relu(x)\n", init="self.f = self._act",
                       forward="out = self.f(out)")
    assert "torch_compute" in rejected_by(src)


def test_a_function_s_names_are_walked_once_however_many_names_it_has(monkeypatch):
    # a converted seed's call() has tens of thousands of names: one walk per name took hours
    from tools.guards import own_objects
    walked = []
    real = own_objects._stores
    monkeypatch.setattr(own_objects, "_stores", lambda fn: walked.append(id(fn)) or real(fn))
    body = "\n".join(f"        b{i} = torch.empty_like(x)" for i in range(300))
    run_static_guards(candidate(forward=body), STRICT)
    assert len(walked) == len(set(walked))


def test_a_function_init_defines_and_only_calls_may_build_torch_modules():
    init = ("def conv_bn(c):\n    return nn.Sequential(nn.Conv2d(c, c, 3), nn.BatchNorm2d(c))\n"
            "self.body = nn.Sequential(conv_bn(4), conv_bn(4))")
    assert "torch_compute" not in rejected_by(candidate(init=init))


_SET_UP_HELPER = "def block(c):\n    return nn.Sequential(nn.Conv2d(c, c, 3), nn.BatchNorm2d(c), nn.ReLU())\n"


def test_a_top_level_function_only_init_calls_may_build_torch_modules():
    # a UNet file's `def block(i, o): return nn.Sequential(...)` beside the class
    src = candidate(prelude=_SET_UP_HELPER, init="self.body = nn.Sequential(block(4), block(4))")
    assert "torch_compute" not in rejected_by(src)


def test_a_computed_setattr_on_self_keeps_a_top_level_helper_set_up():
    # `for i in range(n): setattr(self, f"block{i}", block(c))`, a loop layers are often built in
    src = candidate(prelude=_SET_UP_HELPER, init="for i in range(2):\n    setattr(self, f'b{i}', block(4))")
    assert "torch_compute" not in rejected_by(src)


def test_a_computed_getattr_on_another_object_still_keeps_a_top_level_helper_on_the_forward_path():
    import tools.guards.regions as regions
    src = candidate(prelude="import builtins\n" + _SET_UP_HELPER, init="self.body = block(4)",
                    forward="f = getattr(builtins, 'gl' + 'obals')")
    assert regions._dynamic_names(ast.parse(src))
    assert "torch_compute" in rejected_by(src)
    assert not regions._dynamic_names(ast.parse(candidate(init="setattr(self, 'f' + 'c', 1)")))
    assert regions._dynamic_names(ast.parse(candidate(forward="f = getattr(self, 'f' + 'c')")))


def test_a_set_up_only_class_reached_by_a_computed_getattr_on_self_in_the_forward_is_on_the_forward_path():
    # Features(...) run only on a dummy input in __init__ counts as set-up, unless a computed name may reach it
    feats = "class Features(nn.Module):\n    def forward(self, t):\n        return torch.relu(t)\n"
    src = candidate(prelude=feats, init="self.head = Features()\nself.head(torch.zeros(1))",
                    forward="out = getattr(self, 'he' + 'ad')(out)")
    assert "torch_compute" in rejected_by(src)


_INIT_HELPER = ("{dec}\ndef init_identity_(w):\n    w.copy_(torch.eye(w.shape[0], w.shape[1]))\n    return w\n")


def test_a_set_up_helper_under_torch_no_grad_stays_set_up():
    # `@torch.no_grad() def init_identity_(w)` called from __init__ on a layer's weight
    src = candidate(prelude=_INIT_HELPER.format(dec="@torch.no_grad()"),
                    init="self.fc = nn.Linear(4, 4)\ninit_identity_(self.fc.weight)")
    assert "torch_compute" not in rejected_by(src)


def test_a_set_up_helper_under_lru_cache_stays_set_up():
    # a rotary or sinusoid table built once by an lru_cache'd helper in __init__
    src = candidate(prelude="import functools\n" + _INIT_HELPER.format(dec="@functools.lru_cache"),
                    init="self.fc = nn.Linear(4, 4)\ninit_identity_(self.fc.weight)")
    assert "torch_compute" not in rejected_by(src)


@pytest.mark.parametrize("dec, forward", [("@torch.no_grad()", "init_identity_(out)"),
                                          ("@functools.lru_cache", "init_identity_(out)"), ("@register", "")])
def test_a_helper_called_from_the_forward_or_under_another_decorator_is_on_the_forward_path(dec, forward):
    registry = "import functools\nHOOKS = []\ndef register(f):\n    HOOKS.append(f)\n    return f\n"
    src = candidate(prelude=registry + _INIT_HELPER.format(dec=dec), forward=forward,
                    init="self.fc = nn.Linear(4, 4)\ninit_identity_(self.fc.weight)")
    assert "torch_compute" in rejected_by(src)


_BUILDER = """
class Unit(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dw = self.depthwise_conv(c, c, 3)
{forward}
    {dec}
    def depthwise_conv({first}i, o, k):
        return nn.Conv2d(i, o, k, padding=1, groups=i, bias=False)
"""


@pytest.mark.parametrize("dec, first", [("@staticmethod", ""), ("@classmethod", "cls, ")])
def test_a_static_or_class_method_builder_only_init_calls_stays_set_up(dec, first):
    # torchvision's ShuffleNetV2 `@staticmethod def depthwise_conv(...)`, called as self.depthwise_conv(...) in __init__
    src = candidate(init="self.unit = Unit(4)") + _BUILDER.format(dec=dec, first=first, forward="")
    assert "torch_compute" not in rejected_by(src)


def test_a_static_method_builder_the_forward_calls_is_on_the_forward_path():
    forward = "    def forward(self, x):\n        return self.depthwise_conv(4, 4, 3)(x)\n"
    src = candidate(init="self.unit = Unit(4)", forward="out = self.unit(out)") + \
        _BUILDER.format(dec="@staticmethod", first="", forward=forward)
    assert "torch_compute" in rejected_by(src)


_RECURSIVE_HELPER = ("def build(c, depth):\n    if depth == 0:\n        return [nn.Linear(c, c)]\n"
                     "    return [nn.Linear(c, c)] + build(c, depth - 1)\n")


def test_a_top_level_function_only_init_and_itself_call_may_build_torch_modules():
    src = candidate(prelude=_RECURSIVE_HELPER, init="self.body = nn.ModuleList(build(4, 2))")
    assert "torch_compute" not in rejected_by(src)


def test_a_recursive_function_the_forward_calls_is_on_the_forward_path():
    src = candidate(prelude=_RECURSIVE_HELPER, init="self.body = nn.ModuleList(build(4, 2))",
                    forward="junk = build(4, 1)")
    assert "torch_compute" in rejected_by(src)


_ACTIVATION = "def sq_relu(x):\n    return torch.relu(x) ** 2\n"
_ENCODER = "self.layer = nn.TransformerEncoderLayer(8, 2, 16, activation={})"


@pytest.mark.parametrize("activation", ["sq_relu", "lambda x: torch.tanh(x) * x"])
def test_an_activation_set_up_hands_to_a_torch_layer_keeps_no_op(activation):
    src = candidate(prelude=_ACTIVATION, init=_ENCODER.format(activation))
    assert "torch_compute" not in rejected_by(src)


@pytest.mark.parametrize("forward", ["out = sq_relu(out)", "out = self.layer.activation(out)"])
def test_an_activation_handed_to_a_torch_layer_and_run_by_the_forward_is_refused(forward):
    src = candidate(prelude=_ACTIVATION, init=_ENCODER.format("sq_relu"), forward=forward)
    assert "torch_compute" in rejected_by(src)


def test_a_lambda_set_up_hands_to_a_function_of_its_own_is_on_the_forward_path():
    prelude = "def keep(f):\n    return f\n"
    src = candidate(prelude=prelude, init="self.f = keep(lambda x: torch.tanh(x))", forward="out = self.f(out)")
    assert "torch_compute" in rejected_by(src)


def test_a_top_level_function_forward_calls_is_on_the_forward_path():
    act = "def act(x):\n    return torch.relu(x)\n"
    assert "torch_compute" in rejected_by(candidate(prelude=act, forward="out = act(out)"))


def test_a_parameter_of_the_same_name_elsewhere_is_not_a_call_of_the_top_level_function():
    # a seed's launch-grid helper has a parameter `block`; the UNet file's `block` is still set-up only
    prelude = _SET_UP_HELPER + "def cdiv(n, block):\n    return -(n // -block)\n"
    src = candidate(prelude=prelude, init="self.body = block(cdiv(8, 2))")
    assert "torch_compute" not in rejected_by(src)


def test_a_function_that_rebinds_the_global_name_keeps_it_on_the_forward_path():
    prelude = _SET_UP_HELPER + "def swap():\n    global block\n    block = None\n"
    src = candidate(prelude=prelude, init="self.body = block(4)", forward="swap()")
    assert "torch_compute" in rejected_by(src)


def test_a_top_level_function_init_calls_is_on_the_forward_path_where_names_are_computed():
    # globals()["bl" + "ock"] could call it from forward where no name says so
    src = candidate(prelude=_SET_UP_HELPER + "LOOKUP = globals()\n", init="self.body = block(4)")
    assert "torch_compute" in rejected_by(src)


def test_a_function_init_defines_and_stores_is_on_the_forward_path():
    init = "def act(x):\n    return torch.relu(x)\nself.act = act"
    assert "torch_compute" in rejected_by(candidate(init=init, forward="out = self.act(out)"))


def test_set_up_that_tests_modules_by_type_keeps_no_op():
    init = ("for m in self.modules():\n    if isinstance(m, (nn.Conv2d, nn.Linear)) or isinstance(m, nn.BatchNorm2d):\n"
            "        pass")
    assert "torch_compute" not in rejected_by(candidate(init=init))


def test_set_up_that_keeps_an_op_beside_a_type_test_is_still_rejected():
    assert "torch_compute" in rejected_by(candidate(init="self.ops = (isinstance(self, nn.Conv2d), F.relu)",
                                                    prelude="import torch.nn.functional as F"))


_BLOCK = '''
class Block(nn.Module):
    def __init__(self, d, act_layer=nn.GELU):
        super().__init__()
        self.act = {use}
'''


def test_a_module_class_defaulted_in_init_and_built_there_keeps_no_op():
    src = candidate(init="self.block = Block(4)") + _BLOCK.format(use="act_layer()")
    assert "torch_compute" not in rejected_by(src)


def test_a_module_class_defaulted_in_init_and_stored_is_kept_to_call_later():
    src = candidate(init="self.block = Block(4)") + _BLOCK.format(use="act_layer")
    assert "torch_compute" in rejected_by(src)


def test_a_module_class_defaulted_in_init_and_handed_to_a_constructor_keeps_no_op():
    src = candidate(init="self.block = Block(4)") + _BLOCK.format(use="Block(d, act_layer=act_layer)")
    assert "torch_compute" not in rejected_by(src)


def test_a_module_class_handed_to_a_file_class_that_builds_with_it_keeps_no_op():
    # timm's `Mlp(dim, act_layer=nn.GELU)`, torchvision's `ConvBNReLU(..., norm_layer=nn.BatchNorm2d)`
    block = _BLOCK.replace("act_layer=nn.GELU", "act_layer=None").format(use="act_layer()")
    for init in ("self.block = Block(4, act_layer=nn.GELU)", "self.block = Block(4, nn.GELU)",
                 "self.block = Block(4, act_layer=nn.GELU if True else nn.ReLU)"):
        assert "torch_compute" not in rejected_by(candidate(init=init) + block), init


@pytest.mark.parametrize("use", ["act_layer", "setattr(self, 'f', act_layer)", "[act_layer]"])
def test_a_module_class_handed_to_a_file_class_that_keeps_it_is_kept_to_call_later(use):
    block = _BLOCK.replace("act_layer=nn.GELU", "act_layer=None").format(use=use)
    assert "torch_compute" in rejected_by(candidate(init="self.block = Block(4, act_layer=nn.GELU)") + block)


def test_a_module_class_handed_to_a_file_function_is_kept_to_call_later():
    # only a file class's constructor is followed: a function may keep what it is handed
    src = candidate(init="self.act = pick(nn.GELU)", prelude="def pick(layer):\n    return layer\n")
    assert "torch_compute" in rejected_by(src)


_RESET = '''
class IdentityInitLinear(nn.Linear):
    def reset_parameters(self):
        with torch.no_grad():
            self.weight.copy_(torch.eye(self.out_features, self.in_features) * 0.5)

    def forward(self, x):
        raise NotImplementedError("set-up only")
'''


def test_a_reset_parameters_override_that_the_layers_constructor_calls_is_set_up():
    assert "torch_compute" not in rejected_by(candidate(init="self.fc = IdentityInitLinear(4, 4)") + _RESET)


def test_a_reset_parameters_override_the_forward_calls_is_on_the_forward_path():
    src = candidate(init="self.fc = IdentityInitLinear(4, 4)", forward="self.fc.reset_parameters()") + _RESET
    assert "torch_compute" in rejected_by(src)


def test_a_module_class_defaulted_in_init_and_handed_to_setattr_is_kept_to_call_later():
    src = candidate(init="self.block = Block(4)") + _BLOCK.format(use="setattr(self, 'f', act_layer)")
    assert "torch_compute" in rejected_by(src)


def test_a_submodule_named_like_a_tensor_method_read_for_its_weight_is_fine():
    src = candidate(init="self.embed = nn.Module()\nself.embed.norm = nn.LayerNorm(4)",
                    forward="w = self.embed.norm.weight")
    assert "torch_compute" not in rejected_by(src)


def test_a_tensor_method_reached_through_an_attribute_chain_is_still_compute():
    assert "torch_compute" in rejected_by(candidate(forward="out = x.norm.__call__()"))


# --- torchvision / timm set-up idioms a seed carries from Model ---------------------------

_INIT_LOOP = "for m in self.modules():\n    if isinstance(m, nn.Conv2d):\n        nn.init.zeros_(m.weight)\n"


def test_the_weight_init_loop_over_self_modules_keeps_a_top_level_helper_set_up():
    # torchvision ResNet: conv3x3() beside the class and `for m in self.modules()` in __init__
    src = candidate(prelude=_SET_UP_HELPER, init="self.body = block(4)\n" + _INIT_LOOP)
    assert "torch_compute" not in rejected_by(src)


def test_sys_modules_still_keeps_a_top_level_helper_on_the_forward_path():
    src = candidate(prelude="import sys\n" + _SET_UP_HELPER + "MODS = sys.modules\n", init="self.body = block(4)")
    assert "torch_compute" in rejected_by(src)


_APPLY = '''
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 3, 3)
        self.apply(self._init_weights)

    def _init_weights(self, m):
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            nn.init.trunc_normal_(m.weight, std=0.02)
'''


def test_a_method_handed_to_self_apply_in_init_is_set_up():
    # ConvNeXt's `self.apply(self._init_weights)`
    assert "torch_compute" not in rejected_by(candidate(init="self.net = Net()") + _APPLY)


def test_a_method_handed_to_self_apply_and_called_in_forward_is_on_the_forward_path():
    src = candidate(init="self.net = Net()", forward="self.net._init_weights(self.net)") + \
        _APPLY.replace("std=0.02)", "std=0.02)\n        return torch.relu(m.weight)")
    assert "torch_compute" in rejected_by(src)


def test_a_type_test_in_the_forward_is_no_work():
    assert "torch_compute" not in rejected_by(candidate(forward="flag = isinstance(x, nn.Conv2d)"))


_NORM_LAYER = '''
class Block(nn.Module):
    def __init__(self, c, norm_layer=None):
        super().__init__()
        if norm_layer is None:
            norm_layer = nn.BatchNorm2d
        self.bn = norm_layer(c)
'''


def test_a_norm_layer_chosen_in_init_when_none_was_given_and_built_there_keeps_no_op():
    # torchvision's BasicBlock
    assert "torch_compute" not in rejected_by(candidate(init="self.block = Block(4)") + _NORM_LAYER)


@pytest.mark.parametrize("choice", ["norm_layer = norm_layer or nn.BatchNorm2d",
                                    "norm_layer = norm_layer or partial(nn.BatchNorm2d, eps=1e-3)",
                                    "norm_layer = nn.BatchNorm2d if norm_layer is None else norm_layer"])
def test_a_norm_layer_chosen_by_or_or_a_conditional_and_built_there_keeps_no_op(choice):
    # timm's `norm_layer = norm_layer or partial(nn.LayerNorm, eps=1e-6)`
    block = _NORM_LAYER.replace("if norm_layer is None:\n            norm_layer = nn.BatchNorm2d", choice)
    assert choice in block
    src = candidate(init="self.block = Block(4)", prelude="from functools import partial") + block
    assert "torch_compute" not in rejected_by(src)


@pytest.mark.parametrize("pick", ['rnn = {"lstm": nn.LSTM, "gru": nn.GRU}[kind]\n        self.rnn = rnn(4, 8)',
                                  'self.rnn = [nn.LSTM, nn.GRU][kind == "gru"](4, 8)'])
def test_a_layer_picked_from_a_literal_table_in_init_and_built_there_keeps_no_op(pick):
    # a configurable encoder's recurrent layer (a helper's probe: its seed refused as keeping a PyTorch op)
    block = f"""
class Encoder(nn.Module):
    def __init__(self, kind="lstm"):
        super().__init__()
        {pick}
"""
    assert "torch_compute" not in rejected_by(candidate(init="self.enc = Encoder()") + block)


def test_a_layer_picked_from_a_literal_table_and_stored_for_the_forward_is_kept_to_call_later():
    block = """
class Encoder(nn.Module):
    def __init__(self, kind="lstm"):
        super().__init__()
        self.make = {"lstm": nn.LSTM, "gru": nn.GRU}[kind]
"""
    src = candidate(init="self.enc = Encoder()", forward="out = self.enc.make(4, 4)(out)[0]") + block
    assert "torch_compute" in rejected_by(src)


def test_a_norm_layer_chosen_by_or_and_stored_for_the_forward_is_kept_to_call_later():
    block = _NORM_LAYER.replace("if norm_layer is None:\n            norm_layer = nn.BatchNorm2d",
                                "norm_layer = norm_layer or nn.BatchNorm2d").replace(
        "self.bn = norm_layer(c)", "self.norm = norm_layer")
    src = candidate(init="self.block = Block(4)", forward="out = self.block.norm(out)") + block
    assert "torch_compute" in rejected_by(src)


def test_a_partial_built_at_once_keeps_no_op_and_one_kept_is_rejected():
    built = candidate(init="self.norm = partial(nn.LayerNorm, eps=1e-6)(4)", prelude="from functools import partial")
    kept = candidate(init="self.norm = partial(nn.LayerNorm, eps=1e-6)", forward="out = self.norm(4)(out)",
                     prelude="from functools import partial")
    assert "torch_compute" not in rejected_by(built) and "torch_compute" in rejected_by(kept)


def test_a_norm_layer_chosen_in_init_and_stored_for_the_forward_is_kept_to_call_later():
    src = candidate(init="self.block = Block(4)", forward="out = self.block.norm(out)") + \
        _NORM_LAYER.replace("self.bn = norm_layer(c)", "self.norm = norm_layer")
    assert "torch_compute" in rejected_by(src)


_STORED_NORM = '''
class Net(nn.Module):
    def __init__(self, norm_layer=None):
        super().__init__()
        if norm_layer is None:
            norm_layer = nn.BatchNorm2d
        self._norm_layer = norm_layer
        self.layer = self._make_layer(4)

    def _make_layer(self, c):
        norm_layer = self._norm_layer
        return nn.Sequential(nn.Conv2d(c, c, 3), norm_layer(c))
'''


def test_a_norm_layer_stored_on_self_and_read_only_by_set_up_keeps_no_op():
    # torchvision ResNet's self._norm_layer, read by _make_layer
    assert "torch_compute" not in rejected_by(candidate(init="self.net = Net()") + _STORED_NORM)


def test_a_norm_layer_stored_on_self_and_read_in_the_forward_is_kept_to_call_later():
    src = candidate(init="self.net = Net()", forward="out = self.net._norm_layer(4)(out)") + _STORED_NORM
    assert "torch_compute" in rejected_by(src)


def test_a_partial_of_a_norm_layer_built_in_init_keeps_no_op():
    init = "norm = functools.partial(nn.BatchNorm2d, eps=1e-3)\nself.bn = norm(4)"
    assert "torch_compute" not in rejected_by(candidate(prelude="import functools", init=init))


def test_a_partial_of_a_torch_function_stored_on_self_is_kept_to_call_later():
    init = "self.act = functools.partial(torch.clamp, min=0.0)"
    src = candidate(prelude="import functools", init=init, forward="out = self.act(out)")
    assert "torch_compute" in rejected_by(src)


def test_a_layer_built_by_a_partial_in_init_and_run_in_the_forward_is_refused():
    init = "norm = functools.partial(nn.BatchNorm2d, eps=1e-3)\nself.bn = norm(4)"
    src = candidate(prelude="import functools", init=init, forward="out = self.bn(out)")
    assert "torch_compute" in rejected_by(src)


def test_a_top_level_partial_of_a_layer_only_built_in_init_keeps_no_op():
    prelude = "import functools\nConv = functools.partial(nn.Conv2d, kernel_size=3, padding=1)"
    assert "torch_compute" not in rejected_by(candidate(prelude=prelude, init="self.c = Conv(4, 8)"))


def test_a_top_level_dict_of_layer_classes_only_built_in_init_keeps_no_op():
    prelude = 'ACTS = {"gelu": nn.GELU, "relu": nn.ReLU}'
    assert "torch_compute" not in rejected_by(candidate(prelude=prelude, init='self.act = ACTS["gelu"]()'))


@pytest.mark.parametrize("prelude, init", [
    ("import functools\nConv = functools.partial(nn.Conv2d, kernel_size=3, padding=1)", "self.c = Conv(4, 8)"),
    ('ACTS = {"gelu": nn.GELU}', 'self.c = ACTS["gelu"]()')], ids=["partial", "dict"])
def test_a_layer_built_by_a_top_level_factory_and_run_in_the_forward_is_refused(prelude, init):
    src = candidate(prelude=prelude, init=init, forward="out = self.c(out)")
    assert "torch_compute" in rejected_by(src)


def test_a_top_level_dict_of_layer_classes_read_in_the_forward_is_kept_to_call_later():
    prelude = 'ACTS = {"gelu": nn.GELU}'
    assert "torch_compute" in rejected_by(candidate(prelude=prelude, forward='out = ACTS["gelu"]()(out)'))


def test_a_top_level_partial_of_a_layer_in_a_file_that_looks_names_up_by_string_is_kept():
    prelude = "import functools\nConv = functools.partial(nn.Conv2d, kernel_size=3)"
    src = candidate(prelude=prelude, init="self.c = Conv(4, 8)", forward='globals()["x"] = 1')
    assert "torch_compute" in rejected_by(src)


def test_a_type_annotation_naming_a_layer_keeps_no_op():
    assert "torch_compute" not in rejected_by(candidate(init="self.up: nn.Linear = nn.Linear(4, 8)"))


def test_an_annotated_layer_attribute_run_in_the_forward_is_refused():
    src = candidate(init="self.up: nn.Linear = nn.Linear(4, 8)", forward="out = self.up(out)")
    assert "torch_compute" in rejected_by(src)


_FEATURES = """
import torch.nn.functional as F


class Features(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        return F.relu(self.conv(x))
"""
_SIZED = "self.features = Features()\nflat = self.features(torch.zeros(1, 3, 8, 8)).numel()"


def test_a_module_class_only_set_up_runs_on_a_dummy_input_keeps_its_forward_off_the_forward_path():
    src = candidate(prelude=_FEATURES, init=_SIZED, forward="w = self.features.conv.weight")
    assert "torch_compute" not in rejected_by(src)


@pytest.mark.parametrize("line", ["junk = self.features(x)", "junk = self.features.forward(x)",
                                  "junk = self.features.conv(x)", "f = self.features",
                                  "junk = [m for m in self.children()]", "junk = getattr(self, 'features')"])
def test_a_module_class_the_forward_reaches_keeps_its_forward_on_the_forward_path(line):
    assert "torch_compute" in rejected_by(candidate(prelude=_FEATURES, init=_SIZED, forward=line))


@pytest.mark.parametrize("line", ["self.run = self.features", "self.run = self.features.forward"])
def test_a_module_class_whose_instance_set_up_hands_on_keeps_its_forward_on_the_forward_path(line):
    src = candidate(prelude=_FEATURES, init=_SIZED + "\n" + line, forward="junk = self.run(x)")
    assert "torch_compute" in rejected_by(src)


def test_a_module_class_another_class_derives_from_keeps_its_forward_on_the_forward_path():
    prelude = _FEATURES + "\n\nclass More(Features):\n    pass\n"
    assert "torch_compute" in rejected_by(candidate(prelude=prelude, init=_SIZED))


_SET_UP_ONLY = '''
class ConvBN(nn.Sequential):
    def __init__(self, c):
        super().__init__(nn.Conv2d(c, c, 3), nn.BatchNorm2d(c))

    def forward(self, *args, **kwargs):
        raise RuntimeError("set-up only")
'''


def test_a_layer_subclass_whose_forward_only_raises_and_is_only_built_in_init_is_no_work():
    # a seed's ConvBNReLU(nn.Sequential), carried for its weights
    assert "torch_compute" not in rejected_by(candidate(init="self.block = ConvBN(4)") + _SET_UP_ONLY)


@pytest.mark.parametrize("forward", ["out = super(ConvBN, self.block).forward(x)",
                                     "out = self.block[0]._conv_forward(x, self.block[0].weight, None)",
                                     "out = self.block(x)"])
def test_a_layer_subclass_whose_forward_raises_but_is_reached_from_the_forward_is_still_rejected(forward):
    assert "torch_compute" in rejected_by(candidate(init="self.block = ConvBN(4)", forward=forward) + _SET_UP_ONLY)


def test_a_set_up_only_layer_subclass_built_through_functools_partial_in_set_up_is_no_work():
    # EfficientNet-PyTorch's `partial(Conv2dStaticSamePadding, image_size=...)`, built in __init__
    init = "make = functools.partial(ConvBN, 4)\nself.block = make()"
    assert "torch_compute" not in rejected_by("import functools\n" + candidate(init=init) + _SET_UP_ONLY)


def test_a_set_up_only_layer_subclass_handed_to_partial_in_the_forward_is_still_rejected():
    src = "import functools\n" + candidate(init="self.block = ConvBN(4)",
                                           forward="out = functools.partial(ConvBN, 4)()(x)") + _SET_UP_ONLY
    assert "torch_compute" in rejected_by(src)


def test_a_layer_subclass_with_a_forward_of_its_own_is_still_rejected():
    src = candidate(init="self.block = ConvBN(4)") + _SET_UP_ONLY.replace(
        'raise RuntimeError("set-up only")', "return super().forward(*args)")
    assert "torch_compute" in rejected_by(src)


@pytest.mark.parametrize("prelude", [
    "from triton._C.libtriton import interpreter",
    "import triton.runtime.interpreter",
    "flag = triton.knobs.runtime.interpret",
    "class Op:\n    __triton_builtin__ = True",
    "def grab(v):\n    return v.handle",
    'def grab(v):\n    return getattr(v, "handle")',
    "def hook(k):\n    k.add_pre_run_hook(print)",
    "def hooks(k):\n    return k.pre_run_hooks",
])
def test_triton_internals_a_cpu_judgement_would_run_as_python_are_refused(prelude):
    finding = next((f for f in run_static_guards(candidate(prelude=prelude), STRICT) if f.reject), None)
    assert finding is not None and finding.guard == "triton_internals", finding


def test_a_variable_of_the_files_own_named_handle_is_not_triton_internals():
    src = candidate(forward="handle = x.contiguous()\nout = handle")
    assert not [f for f in run_static_guards(src, STRICT) if f.guard == "triton_internals"]
