"""tools/dialect/fallback_rewrite.py: the rewrites of ops Inductor leaves to PyTorch give
ATen's own values and indices (the capture that uses them: tests/test_level3_seeds.py)."""
from __future__ import annotations

import pytest
import torch

from tools.dialect import fallback_rewrite as fr

aten = torch.ops.aten


def _x(*shape, nan_at=None):
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(3))
    if nan_at is not None:
        x[nan_at] = float("nan")
    return x


@pytest.mark.parametrize("k, dim, keepdim", [(1, -1, False), (4, -1, True), (20, 1, False), (2, 0, False)])
def test_kthvalue_gives_atens_value_and_index(k, dim, keepdim):
    x = _x(6, 20)
    want, got = aten.kthvalue.default(x, k, dim, keepdim), fr.kthvalue(x, k, dim, keepdim)
    assert torch.equal(want[0], got[0]) and torch.equal(want[1], got[1])


@pytest.mark.parametrize("n", [7, 8])
def test_median_along_a_dim_gives_the_lower_median_and_its_index(n):
    x = _x(5, n)
    want, got = aten.median.dim(x, 1), fr.median_dim(x, 1)
    assert torch.equal(want[0], got[0]) and torch.equal(want[1], got[1])


def test_median_along_a_dim_gives_nan_and_the_first_nans_index_where_the_slice_holds_one():
    x = _x(5, 8, nan_at=(2, 5))
    x[2, 6] = float("nan")
    want, got = aten.median.dim(x, 1, True), fr.median_dim(x, 1, True)
    assert torch.equal(want[0].isnan(), got[0].isnan()) and want[0].isnan().any()
    assert torch.equal(want[0].nan_to_num(), got[0].nan_to_num()) and torch.equal(want[1], got[1])


def test_median_of_an_integer_tensor_gives_atens_value_and_index():
    x = torch.randint(0, 50, (4, 9), generator=torch.Generator().manual_seed(1))
    want, got = aten.median.dim(x, 1), fr.median_dim(x, 1)
    assert torch.equal(want[0], got[0])
    assert torch.equal(x.gather(1, got[1][:, None])[:, 0], want[0])   # equal keys: any of their indices


def test_median_of_all_elements_gives_atens_value_nan_included():
    assert torch.equal(aten.median.default(_x(4, 9)), fr.median(_x(4, 9)))
    assert fr.median(_x(4, 9, nan_at=(1, 1))).isnan()


@pytest.mark.parametrize("args", [
    ([1, 3], [0], [1, 2], [2, 3]),    # nn.Bilinear: (N, in1) x (out, in1, in2) x (N, in2)
    ([1], [0], [], [2]),              # no sumdim past the product's own
])
def test_trilinear_gives_atens_values(args):
    g = torch.Generator().manual_seed(0)
    if len(args[0]) == 2:
        i1, i2, i3 = torch.randn(5, 4, generator=g), torch.randn(6, 4, 3, generator=g), torch.randn(5, 3, generator=g)
    else:
        i1, i2, i3 = torch.randn(5, 4, generator=g), torch.randn(6, 4, generator=g), torch.randn(5, 6, 4, generator=g)
    want = aten._trilinear.default(i1, i2, i3, *args)
    got = fr.trilinear(i1, i2, i3, *args)
    assert want.shape == got.shape and torch.allclose(want, got, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("p", [1.0, 2.0, 3.0])
def test_embedding_renorm_gives_atens_table(p):
    w = _x(20, 6) * 0.6
    idx = torch.randint(0, 20, (4, 7), generator=torch.Generator().manual_seed(2))    # rows looked up twice
    want = w.clone()
    torch.embedding_renorm_(want, idx, 1.0, p)
    assert not torch.equal(want, w) and torch.allclose(fr.embedding_renorm(w, idx, 1.0, p), want, rtol=1e-6, atol=0)


def test_a_0_dim_input_is_left_to_pytorch():
    x = torch.tensor(1.5)
    assert fr.kthvalue(x, 1, 0) is NotImplemented and fr.median(x) is NotImplemented


@pytest.mark.gpu
@pytest.mark.parametrize("dim, keepdim", [(-1, False), (0, True)])
def test_on_a_gpu_inductor_s_compile_of_the_median_rewrite_gives_atens_values_and_indices(dim, keepdim):
    """Compiled for cuda, as every capture compiles it, with and without NaN in a slice (an
    isnan().any() beside an argmax of isnan, the earlier form, compiled to all-NaN on cuda)."""
    x = _x(9, 7, nan_at=(2, 5)).cuda()
    x[7, 0] = x[2, 1] = float("nan")
    for t in (x.nan_to_num(), x):
        torch._dynamo.reset()
        want, got = aten.median.dim(t, dim, keepdim), torch.compile(fr.median_dim)(t, dim, keepdim)
        assert torch.equal(want[0].isnan(), got[0].isnan()) and torch.equal(want[0].nan_to_num(), got[0].nan_to_num())
        assert torch.equal(want[1], got[1])


def test_a_bool_scatter_gives_atens_values_and_other_dtypes_are_left_to_inductor():
    g = torch.Generator().manual_seed(5)
    mask = torch.rand(3, 40, generator=g) > 0.5
    order = torch.argsort(torch.rand(3, 40, generator=g), dim=1)
    assert torch.equal(fr.scatter_bool(mask, 1, order, mask), aten.scatter.src(mask, 1, order, mask))
    x = torch.randn(3, 40)
    assert fr.scatter_bool(x, 1, order, x) is NotImplemented


def test_an_add_with_alpha_is_the_add_of_the_scaled_operand_and_one_without_is_left_to_inductor():
    g = torch.Generator().manual_seed(6)
    x, y = torch.randn(5, 7, generator=g), torch.randn(5, 7, generator=g)
    assert torch.allclose(fr.add_alpha(x, y, alpha=0.1), aten.add.Tensor(x, y, alpha=0.1), rtol=0, atol=1e-6)   # ATen fuses: an ulp
    assert fr.add_alpha(x, y) is NotImplemented and fr.add_alpha(x, y, alpha=1) is NotImplemented


def test_a_compiled_add_with_alpha_beside_a_matmul_keeps_its_alpha():
    """Inductor's matmul-plus-add fusion matched `add(b, x @ w, alpha=a)` and dropped `a`."""
    from torch._inductor.compile_fx import compile_fx
    g = torch.Generator().manual_seed(7)
    x, w, b = torch.randn(16, 8, generator=g), torch.randn(8, 4, generator=g), torch.randn(4, generator=g)

    def fn(x, w, b):
        return torch.add(b, x @ w, alpha=0.1)
    torch._dynamo.reset()
    got = torch.compile(fn, backend=lambda gm, inputs: compile_fx(gm, inputs, decompositions={
        **torch._inductor.decomposition.select_decomp_table(), **fr.fallback_decompositions()}))(x, w, b)
    assert torch.allclose(got, b + 0.1 * (x @ w), atol=1e-5)


def _tie_grids(align_corners):
    """An identity grid resizing 5x7 to 9x13 (every other point halfway between two pixels), a
    scaled one reaching past the border, and random points: nearest sampling's hard cases."""
    theta = torch.tensor([[1., 0., 0.], [0., 1., 0.]])[None].expand(2, 2, 3)
    g = torch.Generator().manual_seed(8)
    return [torch.nn.functional.affine_grid(theta, [2, 3, 9, 13], align_corners=align_corners),
            torch.nn.functional.affine_grid(theta * 1.7, [2, 3, 11, 9], align_corners=align_corners),
            torch.rand(2, 6, 8, 2, generator=g) * 3 - 1.5]


@pytest.mark.parametrize("align_corners", [True, False])
@pytest.mark.parametrize("padding_mode", [0, 1, 2], ids=["zeros", "border", "reflection"])
def test_nearest_grid_sampling_picks_eagers_pixel_at_every_tie(padding_mode, align_corners):
    x = torch.randn(2, 3, 5, 7, generator=torch.Generator().manual_seed(9))
    for grid in _tie_grids(align_corners):
        assert torch.equal(fr.grid_sample_nearest(x, grid, 1, padding_mode, align_corners),
                           aten.grid_sampler_2d(x, grid, 1, padding_mode, align_corners))


def test_a_compiled_nearest_grid_sample_picks_eagers_pixel_and_bilinear_compiles_as_before():
    """torch's decomposition rounded ties to the other pixel: whole columns off (54 of 702)."""
    from torch._inductor.compile_fx import compile_fx
    x = torch.randn(2, 3, 5, 7, generator=torch.Generator().manual_seed(10))

    def fn(x, grid):
        return (torch.nn.functional.grid_sample(x, grid, mode="nearest", align_corners=True),
                torch.nn.functional.grid_sample(x, grid, mode="bilinear", align_corners=True))
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend=lambda gm, inputs: compile_fx(gm, inputs, decompositions={
        **torch._inductor.decomposition.select_decomp_table(), **fr.fallback_decompositions()}))
    grid = _tie_grids(True)[0]
    (nearest, bilinear), (want_nearest, want_bilinear) = compiled(x, grid), fn(x, grid)
    assert torch.equal(nearest, want_nearest) and torch.allclose(bilinear, want_bilinear, atol=1e-5)


@pytest.mark.gpu
def test_on_a_gpu_a_bool_scatter_compiles_to_triton_alone():
    """A top-p filter's `remove.scatter(1, order, remove)`: Inductor's cuda backend left it to
    PyTorch (`aten.scatter_.src`), and the seed was refused."""
    from tools.dialect.inductor_capture import capture
    from tools.problem import load_problem
    from pathlib import Path
    problem = load_problem(Path(__file__).parent / "problems" / "level3" / "top_p_filter.py")
    call = capture(problem, "cuda").code.split("def call(")[1]
    assert [line for line in call.splitlines() if "aten.scatter" in line and not line.strip().startswith("#")] == []


def _volume_grid(align_corners: bool) -> torch.Tensor:
    """Points on the voxel lattice (ties for nearest), scaled past the volume, and at random."""
    theta = torch.eye(3, 4)[None].expand(2, 3, 4)
    g = torch.Generator().manual_seed(11)
    lattice = torch.nn.functional.affine_grid(theta, [2, 3, 4, 5, 6], align_corners=align_corners)
    return torch.cat([lattice.reshape(2, -1, 1, 1, 3), (lattice * 1.6).reshape(2, -1, 1, 1, 3),
                      (torch.rand(2, 40, 1, 1, 3, generator=g) * 3 - 1.5)], dim=1)


@pytest.mark.parametrize("align_corners", [True, False])
@pytest.mark.parametrize("padding_mode", [0, 1, 2], ids=["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode", [0, 1], ids=["trilinear", "nearest"])
def test_volume_grid_sampling_gives_atens_values(mode, padding_mode, align_corners):
    # aten.grid_sampler_3d had no decomposition: F.grid_sample of a volume was no seed
    x = torch.randn(2, 3, 4, 5, 6, generator=torch.Generator().manual_seed(12))
    grid = _volume_grid(align_corners)
    got, want = fr.grid_sample_3d(x, grid, mode, padding_mode, align_corners), \
        aten.grid_sampler_3d(x, grid, mode, padding_mode, align_corners)
    assert torch.equal(got, want) if mode == 1 else torch.allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("reduction", [0, 1, 2], ids=["none", "mean", "sum"])
@pytest.mark.parametrize("shape", [(4, 6), (6,)])
def test_multilabel_margin_loss_gives_eagers_loss_and_targets_past_a_minus_one(shape, reduction):
    # torch's decomposition counted the slots after the first -1 as class 0 (eager 3.86, compiled 11.70)
    g = torch.Generator().manual_seed(13)
    x, target = torch.randn(*shape, generator=g), torch.randint(-1, shape[-1], shape, generator=g)
    target[..., 0] = 2   # one target at least, and a repeat of it further on
    got, want = fr.multilabel_margin_loss(x, target, reduction), aten.multilabel_margin_loss_forward(x, target, reduction)
    assert torch.allclose(got[0], want[0], atol=1e-6) and got[0].shape == want[0].shape and torch.equal(got[1], want[1])


def test_torchs_own_multilabel_margin_decomposition_is_ours_only_while_entered():
    from torch._C import DispatchKey
    op = aten.multilabel_margin_loss_forward.default
    before = op.py_kernels.get(DispatchKey.Autograd)
    with fr.eager_multilabel_margin():
        inside = op.py_kernels.get(DispatchKey.Autograd)
    assert (inside is fr.multilabel_margin_loss, op.py_kernels.get(DispatchKey.Autograd) is before) == (True, True)


@pytest.mark.parametrize("shape, out", [((2, 3, 6, 5, 6), (2, 3, 1)), ((2, 3, 6, 5, 6), (3, 5, 2)),
                                        ((3, 7, 4, 9), (2, 3, 4)), ((1, 2, 5, 5, 5), (5, 5, 5))])
def test_volume_adaptive_average_gives_atens_values(shape, out):
    x = _x(*shape)
    torch.testing.assert_close(fr.adaptive_avg_pool3d(x, out), aten._adaptive_avg_pool3d.default(x, out))
