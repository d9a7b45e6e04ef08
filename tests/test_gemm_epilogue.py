"""A Linear's ReLU in its product's epilogue (tools/dialect/gemm_epilogue.py): in the default
compile `relu(addmm(bias, x, w))` whose product nothing else reads is one
`torch.ops.krefine.addmm_act`, which the converter writes as one GEMM-family launch with
`act='relu'`; a product read elsewhere keeps its ReLU as a kernel of its own.

The converter tests read captures recorded on cpu (tests/fixtures/inductor_level3/
cpu_mlp_relu_shared.py, cpu_linear_relu_epilogue.py, cpu_token_ffn_relu.py: `python -m tools.dialect capture PROBLEM
--device cpu`); the seed then runs in lockstep with Model in Triton's interpreter.
"""
from __future__ import annotations

import pytest

from tests.test_level3_seeds import _lockstep_errors, _seed


def _call(code: str) -> str:
    return code.split("\ndef call(args):")[1].split("\nclass ModelNew")[0]


def test_a_linear_and_its_relu_are_one_gemm_launch_with_the_relu_in_its_epilogue():
    call = _call(_seed("mlp_relu_shared"))
    first = next(line for line in call.splitlines() if "gemm(" in line)
    assert "bias=arg1_1" in first and "act='relu'" in first, first
    assert call.count("act='relu'") == 1


def test_a_product_read_besides_its_relu_stays_a_product_and_its_relu_a_kernel():
    call = _call(_seed("mlp_relu_shared"))
    assert call.count("gemm(") == 3
    assert call.count(".run(") + call.count("[grid") == 1   # fc2's ReLU: the one Triton kernel left


def test_the_seed_with_a_relu_epilogue_matches_the_model_on_three_calls(tmp_path):
    assert max(_lockstep_errors("mlp_relu_shared", tmp_path)) < 1e-4


def _post_grad_graph(model, x):
    """A copy of the post-grad graph Inductor compiles for `model` on cpu."""
    import torch
    seen = []

    def keep(graph):
        copy = torch.fx.Graph()
        out = copy.graph_copy(graph, {})
        copy.output(out)
        seen.append(copy)

    torch._dynamo.reset()
    with torch._inductor.config.patch(post_grad_custom_pre_pass=keep), torch.no_grad():
        torch.compile(model)(x)
    return seen[0]


def _targets(graph) -> list[str]:
    return [str(n.target) for n in graph.nodes if n.op == "call_function"]


@pytest.mark.parametrize("epilogues", [True, False])
def test_only_the_default_compile_takes_a_linear_s_relu_into_its_product(epilogues):
    """The templates compile (max-autotune) fuses the ReLU into its own Triton product: the pass
    leaves it there (RecurrencePass(epilogues=False)), and the graph cache tells the two apart."""
    import torch
    from tools.dialect.recurrence import RecurrencePass
    graph = _post_grad_graph(torch.nn.Sequential(torch.nn.Linear(8, 6), torch.nn.ReLU()), torch.randn(3, 8))
    RecurrencePass(epilogues)(graph)
    fused = "krefine.addmm_act.default" in _targets(graph)
    assert fused == epilogues and ("aten.relu.default" in _targets(graph)) != epilogues
    assert RecurrencePass(True).uuid() != RecurrencePass(False).uuid()


def test_a_product_with_no_elements_keeps_its_relu_for_inductor_to_drop():
    import torch
    from tools.dialect.gemm_epilogue import epilogue_pass
    graph = _post_grad_graph(torch.nn.Sequential(torch.nn.Linear(8, 6), torch.nn.ReLU()), torch.randn(0, 8))
    assert epilogue_pass(graph) == 0


def test_the_tf32x3_variant_runs_every_product_with_a_relu_epilogue_at_tf32x3():
    """The portfolio's tf32x3 variant rewrote `gemm(...)` statements only: the assigned launches of
    a Linear and its ReLU stayed exact fp32 (1_MLP at 0.50x eager for 1.61x on an H200)."""
    from tools.dialect.portfolio import PortfolioEntry, _precision_variant
    variant = _call(_precision_variant(PortfolioEntry("default+gemm", _seed("mlp_relu_shared"))).code)
    launches = [line for line in variant.splitlines() if "gemm(" in line]
    assert len(launches) == 3 and all("precision='tf32x3'" in line for line in launches), launches


def test_on_cuda_a_default_compile_whose_only_product_has_a_relu_epilogue_still_gets_the_templates_compile():
    """The templates compile writes a Linear and its ReLU as one fused template: a default capture
    holding only krefine::addmm_act still leaves it something to replace (not "same as default")."""
    from pathlib import Path
    from tools.dialect import read_capture
    from tools.dialect.portfolio import seed_portfolio
    from tools.problem import load_problem
    root = Path(__file__).resolve().parents[1]
    code = (root / "tests" / "fixtures" / "inductor_level3" / "cpu_linear_relu_epilogue.py").read_text(encoding="utf-8")
    assert "krefine.addmm_act.default(" in code and "extern_kernels." not in code.split("def call(")[1]
    calls = []

    def capture(problem, device, templates=False, module_mode="train"):
        calls.append(templates)
        return read_capture(code)

    seed_portfolio(load_problem(root / "tests" / "problems" / "level3" / "linear_relu.py"), "cuda", capture)
    assert calls == [False, True]


def _scaled_model():
    """relu(addmm(b, x, w)) with beta and alpha other than 1, beside one with both 1."""
    import torch

    class Scaled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w, self.b = torch.nn.Parameter(torch.randn(8, 6)), torch.nn.Parameter(torch.randn(6))

        def forward(self, x):
            return (torch.relu(torch.addmm(self.b, x, self.w, beta=0.5, alpha=2.0))
                    + torch.relu(torch.addmm(self.b, x, self.w)))
    return Scaled()


def test_a_product_scaled_by_alpha_or_beta_keeps_its_relu():
    import torch
    from tools.dialect.gemm_epilogue import epilogue_pass
    graph = _post_grad_graph(_scaled_model(), torch.randn(3, 8))
    assert epilogue_pass(graph) == 1   # the unscaled one only
    assert _targets(graph).count("aten.relu.default") == 1


def test_a_float64_linear_and_its_relu_are_one_product():
    import torch
    from tools.dialect.gemm_epilogue import epilogue_pass
    model = torch.nn.Sequential(torch.nn.Linear(8, 6), torch.nn.ReLU()).double()
    graph = _post_grad_graph(model, torch.randn(3, 8, dtype=torch.float64))
    assert epilogue_pass(graph) == 1 and "aten.relu.default" not in _targets(graph)


def test_a_linear_on_tokens_takes_its_relu_into_its_product_and_reshapes_after():
    """(batch, tokens, features): reshape(addmm(bias, reshape(x), w)) then ReLU is one product with
    the ReLU in its epilogue; the residual add is the one Triton kernel left."""
    call = _call(_seed("token_ffn_relu"))
    first = next(line for line in call.splitlines() if "gemm(" in line)
    assert "act='relu'" in first and "bias=arg1_1" in first, first
    assert call.count("gemm(") == 2 and call.count("[grid") == 1


def test_the_seed_of_a_linear_on_tokens_with_its_relu_epilogue_matches_the_model(tmp_path):
    assert max(_lockstep_errors("token_ffn_relu", tmp_path)) < 1e-4


def test_a_reshaped_product_read_besides_its_relu_keeps_its_relu():
    import torch
    from tools.dialect.gemm_epilogue import epilogue_pass

    class Both(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(8, 6)

        def forward(self, x):
            z = self.fc(x)
            return torch.relu(z), z

    graph = _post_grad_graph(Both(), torch.randn(2, 3, 8))
    assert epilogue_pass(graph) == 0 and "aten.relu.default" in _targets(graph)
