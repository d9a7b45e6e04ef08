"""Fresh inputs for every timed sample, alike for the candidate and the baselines.

A forward can keep a copy of the inputs it saw and, on the device, compare and skip its
work when they come again: every launch check sees the same kernels, and the timed calls
reuse their inputs. So every timed sample runs on a set of inputs it has not seen:
`input_sets` makes one set per sample before a round (the problem's own get_inputs under
seeds drawn from the OS, each laid out as the timed inputs), and `Rotation`, the timer's
`before_each`, copies sample i's set into the timed tensors before the sample's L2 flush,
outside its events: device-to-device copies queued on the stream, no host sync, so the
GPU work before a sample (copies, then the flush) and the host's head start are the same
for every callable timed alike. The judge decides once per judgement whether both sides
rotate (`plan`), and asks the worker for the same; an earlier try that refilled from the
host and synced before the candidate's samples only was measurably unfair (BENCHMARKS.md).

Not covered: inputs whose sets do not fit in MAX_BYTES, or take longer than MAX_MAKE_S a
round to make (timed as they are, checks.timed_on_fresh_inputs says so); the calls within
one batched sample or one graph replay share a set.
"""
from __future__ import annotations

import secrets
import time
from typing import Callable

MAX_BYTES = 256 << 20   # all of one round's sets; larger inputs are timed as they are
MAX_MAKE_S = 0.25       # making one round's sets may take this long, or no set is made


def tensor_bytes(inputs: list) -> int:
    import torch
    return sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor))


def plan(make: Callable[[int], list], like: list, count: int) -> int:
    """How many sets a round rotates through: `count` (one per sample) where the inputs
    hold a tensor, `count` sets fit in MAX_BYTES and making them would take at most
    MAX_MAKE_S (one set made and timed here); else 0, timed as they are."""
    size = tensor_bytes(like)
    if count < 2 or size == 0 or size * count > MAX_BYTES:
        return 0
    t0 = time.perf_counter()
    one = make(secrets.randbits(31))
    if not fits(like, one) or (time.perf_counter() - t0) * count > MAX_MAKE_S:
        return 0
    return count


def input_sets(make: Callable[[int], list], like: list, count: int) -> list[list] | None:
    """`count` sets of inputs from `make(seed)`, each seed drawn from the OS, each laid out as
    `like` (tensors of its types, shapes, dtypes, strides and devices; equal other
    arguments); None where count < 2 or a set is laid out otherwise."""
    if count < 2:
        return None
    sets = []
    for _ in range(count):
        one = make(secrets.randbits(31))
        if not fits(like, one):
            return None
        sets.append(one)
    return sets


class Rotation:
    """The timer's `before_each(i)`: set i (mod their number) copied into `targets`' own
    tensors on the current stream; `done` counts the samples so written."""

    def __init__(self, targets: list, sets: list[list]):
        import torch
        self.targets, self.sets, self.done = targets, sets, 0
        self._slots = [j for j, x in enumerate(targets) if isinstance(x, torch.Tensor)]

    def __call__(self, i: int) -> None:
        import torch
        src = self.sets[i % len(self.sets)]
        with torch.no_grad():
            for j in self._slots:
                self.targets[j].copy_(src[j], non_blocking=True)
        self.done += 1


def rotation(make: Callable[[int], list], targets: list, count: int) -> Rotation | None:
    """A Rotation over `count` new sets for `targets`, or None (count 0, or a set that does
    not fit them)."""
    sets = input_sets(make, targets, count)
    return None if sets is None else Rotation(targets, sets)


def fits(like: list, other: list) -> bool:
    """`other` laid out as `like`: tensors of its types, shapes, dtypes, strides and devices;
    equal other arguments (a graph or a timed call holds those as they were)."""
    import torch
    if len(like) != len(other):
        return False
    for a, b in zip(like, other):
        if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
            if not (type(a) is type(b) and a.shape == b.shape and a.dtype == b.dtype
                    and a.stride() == b.stride() and a.device == b.device):
                return False
            continue
        try:
            if not (type(a) is type(b) and bool(a == b)):
                return False
        except Exception:   # noqa: BLE001 - an argument that cannot say it is equal is not
            return False
    return True
