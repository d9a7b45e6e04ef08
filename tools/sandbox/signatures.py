"""Which Triton kernels each forward call launched, and on what grid: the worker's record.

`LaunchLog` sits in the launch hook: tools/sandbox/launches.py hands it every launch the
candidate makes (past the compile-only and warm-up paths, which launch nothing), with
the watch's launch to run it. While a call is open it records each launch as (kernel
name, compiled kernel, grid): the compiled kernel by Triton's hash of it, which covers
its constexpr arguments and launch options, and the grid as Triton evaluated it for
that launch. A call's signature is the multiset of its launches. Two kinds of call:

- "checked": each trial call, whose outputs the judge compares with the reference
  (tools/sandbox/activity.py's Recorder is around every one and opens it here);
- "timed": each call a timing request makes (tools/sandbox/measure_ops.py): the timer's
  calls, and the warm-up and captured calls of a CUDA graph, whose replays run what was
  captured and launch nothing in Python.

`take` hands the judge each kind's distinct signatures with how many calls had each;
tools/judge/timed_path.py compares them. Outside an open call nothing is recorded and
a launch costs one more Python call; inside one, a tuple and, for a callable grid, a
closure around it.

Facts only. Not covered: a launch that bypasses JITFunction.run (a CompiledKernel called
directly: the launch counter misses it too, CUPTI's record does not,
tools/judge/ground_truth.py), and a candidate that edits this record, which shares its
process (README "Sandbox").
"""
from __future__ import annotations

KINDS = ("checked", "timed")
MAX_SIGNATURES = 32     # distinct signatures a reply names per kind; an honest forward has one or two
MAX_ORDERS = 4096       # distinct launch orders kept per kind before calls are only counted
HASH_CHARS = 16         # of Triton's hash of a compiled kernel


class LaunchLog:
    """The launches of each open call, by kind (see the module docstring)."""

    def __init__(self):
        self.attached = False   # the launch hook feeds this log (launches.py calls `attach`)
        self._calls: dict[str, dict[tuple, int]] = {k: {} for k in KINDS}   # launches in order -> calls
        self._unkept = dict.fromkeys(KINDS, 0)
        self._open: list | None = None
        self._kind = KINDS[0]

    def attach(self):
        """The entry the launch hook calls for every launch (once, when it is installed)."""
        self.attached = True
        return self.launch

    def launch(self, run, orig, fn, args, grid, kwargs):
        """One launch, made by `run(orig, fn, args, grid, kwargs)` (the watch's launch);
        recorded while a call is open, with the grid Triton was handed back. Kept raw
        here (the timed calls pay for this): `take` describes it."""
        launches = self._open
        if launches is None:
            return run(orig, fn, args, grid, kwargs)
        if callable(grid):
            given, seen = grid, []

            def grid(meta):
                dims = given(meta)
                seen.append(dims)
                return dims
            kernel = run(orig, fn, args, grid, kwargs)
            dims = seen[-1] if seen else None
        else:
            kernel = run(orig, fn, args, grid, kwargs)
            dims = grid
        launches.append((getattr(fn, "__name__", "?"), getattr(kernel, "hash", None), dims))
        return kernel

    def begin(self, kind: str) -> None:
        """Open one forward call of `kind`; one left open (its forward raised) is dropped."""
        self._open, self._kind = [], kind

    def end(self) -> None:
        """Close the open call: its launches count as one call of its kind."""
        launches, self._open = self._open, None
        if launches is None:
            return
        calls = self._calls[self._kind]
        try:
            key = tuple(launches)
            hash(key)
        except TypeError:   # a grid given as a list: described now
            key = tuple(launch_row(*launch) for launch in launches)
        if key in calls or len(calls) < MAX_ORDERS:
            calls[key] = calls.get(key, 0) + 1
        else:
            self._unkept[self._kind] += 1

    def clear(self, kind: str) -> None:
        self._open = None
        self._calls[kind], self._unkept[kind] = {}, 0

    def take(self) -> dict:
        """The record for the judge, the timed calls then forgotten (the checked ones stay:
        every timing request is compared with all of them). Per kind, [signature, calls]
        pairs, most calls first; a signature is [name, kernel hash, grid, launches] rows;
        `unkept` counts the calls of each kind beyond what is named."""
        out: dict = {"attached": self.attached, "unkept": {}}
        for kind in KINDS:
            merged: dict[tuple, int] = {}
            for launches, n in self._calls[kind].items():
                sig = signature(launches)
                merged[sig] = merged.get(sig, 0) + n
            ranked = sorted(merged.items(), key=lambda kv: -kv[1])
            out[kind] = [[[[name, binary, list(dims) if isinstance(dims, tuple) else dims, k]
                           for (name, binary, dims), k in sig], n] for sig, n in ranked[:MAX_SIGNATURES]]
            out["unkept"][kind] = self._unkept[kind] + sum(n for _, n in ranked[MAX_SIGNATURES:])
        self.clear("timed")
        return out


def grid_dims(grid) -> tuple[int, int, int] | str:
    """A grid as Triton launches it, three ints (missing ones are 1), or its description
    when it is not plain ints (the watch reports such a grid's reads; nothing is read here)."""
    if type(grid) is str:   # described already
        return grid
    if type(grid) in (tuple, list):
        if 0 < len(grid) <= 3 and all(type(d) is int for d in grid):
            return tuple(grid) + (1,) * (3 - len(grid))
        return "(" + ", ".join(str(d) if type(d) is int else type(d).__name__ for d in grid) + ")"
    return type(grid).__name__


def launch_row(name, binary, grid) -> tuple:
    """One launch as the judge reads it: (name, the start of the kernel's hash, grid)."""
    return str(name), binary[:HASH_CHARS] if isinstance(binary, str) else None, grid_dims(grid)


def signature(launches) -> tuple:
    """The multiset of one call's launches: ((name, hash, grid), count) pairs, sorted."""
    counts: dict[tuple, int] = {}
    for launch in launches:
        row = launch_row(*launch)
        counts[row] = counts.get(row, 0) + 1
    return tuple(sorted(counts.items(), key=lambda kv: (kv[0][0], kv[0][1] or "", repr(kv[0][2]))))
