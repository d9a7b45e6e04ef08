"""A forward that draws its own random numbers (tools/kernels/draws.py): Inductor's random kernels
key on int64 seeds it draws with PyTorch (`aten.randint.low_out`); a seed draws them with
krefine's Triton kernel (`draw_seeds`), keyed on the device's generator, and the judge says
whether the output depends on the draw (`stochastic_reference`).

The converter tests read a capture recorded on cpu (tests/fixtures/inductor_level3/
cpu_lstm_random_h0.py: `python -m tools.dialect capture PROBLEM --device cpu`).
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.test_level3_seeds import ROOT, _lockstep_errors, _seed


def test_an_lstms_random_initial_state_gets_a_seed_that_draws_its_seeds_with_triton():
    # 35_LSTM's h0 = torch.randn(...) in the forward had no seed ("the forward's own draw")
    call = _seed("lstm_random_h0")[_seed("lstm_random_h0").index("\ndef call("):]
    assert "draw_seeds(buf0)" in call and "aten.randint" not in call


def test_the_draw_comes_before_the_kernels_that_read_its_seeds():
    lines = [ln.strip() for ln in _seed("lstm_random_h0").splitlines()]
    drawn = lines.index("draw_seeds(buf0)")
    assert min(i for i, ln in enumerate(lines) if ln.startswith("triton_poi_fused_randn_")) > drawn


def test_an_lstm_that_forgets_its_random_initial_state_matches_the_model(tmp_path):
    assert max(_lockstep_errors("lstm_random_h0", tmp_path)) < 1e-4


DRAWS = """
import json, sys, importlib.util
import torch
spec = importlib.util.spec_from_file_location("draws", "tools/kernels/draws.py")
draws = importlib.util.module_from_spec(spec); spec.loader.exec_module(draws)
draw_seeds, draw_seeds_kernel = draws.draw_seeds, draws.draw_seeds_kernel
dev = sys.argv[1]
torch.manual_seed(7)
a, b = draw_seeds(torch.empty(300, dtype=torch.int64, device=dev)), draw_seeds(torch.empty(300, dtype=torch.int64,
                                                                                             device=dev))
gen = torch.cuda.default_generators[0] if dev == "cuda" else None
torch.manual_seed(7)
before = gen.get_offset() if gen is not None else 0
again = draw_seeds(torch.empty(300, dtype=torch.int64, device=dev))
moved = gen.get_offset() - before if gen is not None else 0
print(json.dumps({"distinct": len(set(a.tolist()) | set(b.tolist())), "negative": int((a < 0).sum()),
                  "repeated": bool(torch.equal(a, again)), "moved": moved}))
"""


def _draws(device: str) -> dict:
    env = {**os.environ, **({"TRITON_INTERPRET": "1"} if device == "cpu" else {})}
    done = subprocess.run([sys.executable, "-c", DRAWS, device], capture_output=True, text=True, cwd=ROOT,
                          timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    import json
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_two_draws_give_600_distinct_seeds_over_the_whole_int64_range():
    got = _draws("cpu")
    assert got["distinct"] == 600 and 50 < got["negative"] < 250


def test_on_cpu_a_seeds_count_goes_on_after_the_generator_is_seeded_again():
    # the cpu generator has no offset: draws are counted per seed, so they do not repeat
    assert _draws("cpu")["repeated"] is False


@pytest.mark.gpu
def test_on_a_gpu_torch_manual_seed_repeats_the_draw():
    assert _draws("cuda")["repeated"] is True


@pytest.mark.gpu
def test_on_a_gpu_a_draw_of_300_seeds_moves_the_generators_offset_by_300():
    # after manual_seed the offset restarts at 0; a draw of n moves it by n rounded up to 4
    assert _draws("cuda")["moved"] == 300


NOT_SPECIALISED = """
import torch, importlib.util
spec = importlib.util.spec_from_file_location("draws", "tools/kernels/draws.py")
draws = importlib.util.module_from_spec(spec); spec.loader.exec_module(draws)
print(sorted(p.name for p in draws.draw_seeds_kernel.params if p.do_not_specialize))
"""


def test_the_seed_and_offset_are_not_specialised_on_their_values():
    # Triton's JITFunction (not the interpreter's stand-in, which keeps no parameters)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", NOT_SPECIALISED], capture_output=True, text=True, cwd=ROOT,
                          timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "['offset_hi', 'offset_lo', 'seed_hi', 'seed_lo']"


ONE_KERNEL = """
import json, sys, importlib.util
import torch
spec = importlib.util.spec_from_file_location("draws", "tools/kernels/draws.py")
draws = importlib.util.module_from_spec(spec); spec.loader.exec_module(draws)
draw_seeds, draw_seeds_kernel = draws.draw_seeds, draws.draw_seeds_kernel
out = torch.empty(5, dtype=torch.int64, device="cuda")
for seed in (1, 16, 2 ** 40 + 3):      # == 1, a multiple of 16, past int32
    torch.manual_seed(seed)
    for _ in range(5):                  # offsets 0, 8, 16, 24, 32
        draw_seeds(out)
print(json.dumps(len(draw_seeds_kernel.device_caches[0][0])))
"""


@pytest.mark.gpu
def test_on_a_gpu_every_seed_and_offset_launches_one_compiled_kernel():
    # the judge rejected 35_LSTM's seed: the offset, a multiple of 16 on some calls, compiled another kernel
    done = subprocess.run([sys.executable, "-c", ONE_KERNEL], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "1"
