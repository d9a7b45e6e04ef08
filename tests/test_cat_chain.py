"""A cat that repeats an earlier cat's inputs takes that earlier result (tools/dialect/cat_chain.py):
a DenseNet block's growing concatenations, each from the last.

The graph tests trace small functions with make_fx (each node's meta "val" set) and run the graph
before and after the pass; the seed tests read a capture recorded on cpu
(tests/fixtures/inductor_level3/cpu_dense_block_growing_cat.py: `python -m tools.dialect capture
tests/problems/level3/dense_block_growing_cat.py --device cpu`).
"""
from __future__ import annotations

import re

import pytest

from tests.test_counters import judged_seed
from tests.test_gemm_epilogue import _call
from tests.test_level3_seeds import _seed


def _traced(fn, *args):
    from torch.fx.experimental.proxy_tensor import make_fx
    return make_fx(fn)(*args)


def _cats(gm) -> list:
    import torch
    return [n for n in gm.graph.nodes if n.op == "call_function" and n.target == torch.ops.aten.cat.default]


def _dense(x, *new):
    import torch
    features, outs = [x], []
    for f in new:
        features.append(f * 2.0)
        outs.append(torch.cat(features, 1))
    return outs


def _inputs(n: int, dtype=None):
    import torch
    return [torch.randn(2, 3, 4, 4, dtype=dtype) for _ in range(n)]


def test_each_growing_cat_takes_the_last_one_and_one_new_input():
    from tools.dialect.cat_chain import cat_chain_pass
    gm = _traced(_dense, *_inputs(6))
    assert cat_chain_pass(gm.graph) == 4   # five cats: the first has two inputs, each later one repeats the last
    cats = _cats(gm)
    assert [len(c.args[0]) for c in cats] == [2, 2, 2, 2, 2]
    assert all(c.args[0][0] is before for before, c in zip(cats, cats[1:]))


def test_the_rewritten_graph_gives_the_same_bits():
    import torch
    from tools.dialect.cat_chain import cat_chain_pass
    args = _inputs(9)
    gm = _traced(_dense, *args)
    want = gm(*args)
    assert cat_chain_pass(gm.graph) == 7
    gm.recompile()
    got = gm(*args)
    assert len(got) == len(want) and all(torch.equal(g, w) for g, w in zip(got, want))


def test_the_longest_earlier_cat_is_taken():
    import torch
    from tools.dialect.cat_chain import cat_chain_pass

    def f(a, b, c, d):
        return torch.cat([a, b], 0), torch.cat([a, b, c], 0), torch.cat([a, b, c, d], 0)
    gm = _traced(f, *_inputs(4))
    assert cat_chain_pass(gm.graph) == 2
    two, three, four = _cats(gm)
    assert four.args[0][0] is three and len(four.args[0]) == 2


def test_a_cat_of_mixed_dtypes_or_along_another_dim_is_left_as_it_is():
    import torch
    from tools.dialect.cat_chain import cat_chain_pass

    def mixed(a, b, c):
        return torch.cat([a, b], 1), torch.cat([a, b, c], 1)

    def other_dim(a, b, c):
        return torch.cat([a, b], 0), torch.cat([a, b, c], 1)
    a, b = _inputs(2)
    assert cat_chain_pass(_traced(mixed, a, b, torch.randn(2, 3, 4, 4, dtype=torch.float64)).graph) == 0
    assert cat_chain_pass(_traced(other_dim, *_inputs(3)).graph) == 0


def test_a_negative_dim_is_the_same_dim():
    import torch
    from tools.dialect.cat_chain import cat_chain_pass

    def f(a, b, c):
        return torch.cat([a, b], -3), torch.cat([a, b, c], 1)
    assert cat_chain_pass(_traced(f, *_inputs(3)).graph) == 1


def test_an_earlier_cat_written_into_is_not_taken():
    import torch
    from tools.dialect.cat_chain import cat_chain_pass

    def f(a, b, c):
        y = torch.cat([a, b], 1)
        y.add_(1.0)
        return y, torch.cat([a, b, c], 1)
    gm = _traced(f, *_inputs(3))
    assert cat_chain_pass(gm.graph) == 0


def test_an_earlier_cat_written_into_through_a_view_is_not_taken():
    import torch
    from tools.dialect.cat_chain import cat_chain_pass

    def f(a, b, c):
        y = torch.cat([a, b], 1)
        y[:, :1].add_(1.0)
        return y, torch.cat([a, b, c], 1)
    assert cat_chain_pass(_traced(f, *_inputs(3)).graph) == 0


def test_an_earlier_cat_only_viewed_is_taken():
    import torch
    from tools.dialect.cat_chain import cat_chain_pass

    def f(a, b, c):
        y = torch.cat([a, b], 1)
        return y[:, :1] * 2.0, torch.cat([a, b, c], 1)
    assert cat_chain_pass(_traced(f, *_inputs(3)).graph) == 1


def test_a_later_cat_of_the_prefix_is_not_taken():
    import torch
    from tools.dialect.cat_chain import cat_chain_pass

    def f(a, b, c):
        return torch.cat([a, b, c], 1), torch.cat([a, b], 1)
    assert cat_chain_pass(_traced(f, *_inputs(3)).graph) == 0


def _copies(call: str) -> list[int]:
    """For each conv's output in call(), how many buffers the Triton launches reading it first write
    (a cat's copy kernel: the feature, then each cat buffer it goes into)."""
    features = re.findall(r"^\s+(buf\d+) = conv_nd\(", call, re.M)
    launches = [re.split(r",\s*", a) for a in re.findall(r"^\s+triton_\w+\[grid\([^]]*\]\(([^)]*)\)", call, re.M)]
    return [sum(len([b for b in args[1:] if re.fullmatch(r"buf\d+", b)]) for args in launches if args[0] == f)
            for f in features]


def test_a_capture_of_chained_cats_converts_with_each_feature_copied_once():
    """The recorded capture (made with the pass): each of six conv outputs copied into one cat
    buffer, its own layer's (Inductor writes the first into the second layer's cat too), and the
    seed's call() keeping them so."""
    copies = _copies(_call(_seed("dense_block_growing_cat")))
    assert len(copies) == 6 and sum(copies) <= 7 and max(copies) <= 2, copies


@pytest.mark.slow
def test_the_capture_copies_each_feature_once_where_it_copied_it_into_every_later_cat():
    """A capture made now with the pass, and one made without it (`cat_chain_pass` a no-op): each
    feature copied into about one cat buffer, against into its own and every later one (6, 5, ... 1)."""
    from unittest import mock
    from tools.dialect.inductor_capture import capture
    from tools.dialect.kernelbook import accepted_seed
    from tools.problem import load_problem
    from tests.test_level3_seeds import PROBLEMS
    problem = load_problem(PROBLEMS / "dense_block_growing_cat.py")
    copies = _copies(_call(accepted_seed(problem, capture(problem, "cpu"))))
    with mock.patch("tools.dialect.cat_chain.cat_chain_pass", lambda graph: 0):
        without = _copies(_call(accepted_seed(problem, capture(problem, "cpu"))))
    assert sum(copies) <= 7 and sum(without) >= 3 * sum(copies), (copies, without)


@pytest.mark.slow   # a torch.compile on cpu, about 4 s
def test_cats_sharing_a_prefix_each_take_the_longest_earlier_one_in_a_module_s_graph():
    """tests/problems/level3/cat_prefix_shared.py: [a, b, c], [a, b, d] from [a, b], [a, b, c, d] from
    [a, b, c] (an in-place ReLU on [a, b] notwithstanding: the post-grad graph is functional), and
    three cats growing along the last dim."""
    import importlib.util
    from tests.test_gemm_epilogue import _post_grad_graph
    from tests.test_level3_seeds import PROBLEMS
    from tools.dialect.cat_chain import cat_chain_pass
    spec = importlib.util.spec_from_file_location("cat_prefix_shared", PROBLEMS / "cat_prefix_shared.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert cat_chain_pass(_post_grad_graph(module.Model(), *module.get_inputs())) == 6


@pytest.mark.slow
def test_the_seed_of_cats_sharing_a_prefix_is_judged_correct(tmp_path):
    verdict = judged_seed("cat_prefix_shared", tmp_path)
    assert verdict["verdict"] == "correct", verdict.get("diagnostics")


@pytest.mark.slow
def test_the_dense_block_seed_is_judged_correct(tmp_path):
    verdict = judged_seed("dense_block_growing_cat", tmp_path)
    assert verdict["verdict"] == "correct", verdict.get("diagnostics")
