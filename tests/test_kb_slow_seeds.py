"""benchmarks/kb_slow_seeds.py: which problems the level-1 script sweeps in its last pass."""
from __future__ import annotations

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("kb_slow_seeds", Path(__file__).resolve().parents[1] / "benchmarks" / "kb_slow_seeds.py")
kb = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(kb)


def _r(problem, seed="correct", vs_compile=1.0):
    return {"problem": problem, "seed": seed, "seed_speedup_compile": vs_compile}


def test_only_correct_seeds_at_most_the_threshold_slowest_first():
    results = [_r("1_a", vs_compile=0.95), _r("2_b", vs_compile=0.5), _r("3_c", seed="rejected", vs_compile=0.1),
               _r("4_d", vs_compile=0.8), _r("5_e", seed="no seed", vs_compile=None)]
    assert kb.slow_seeds(results, 0.9, 20) == ["2_b", "4_d"]


def test_the_filter_names_kernelbench_problems_by_number():
    assert kb.as_filter(["17_x", "47_y"]) == "^(17|47)_"
