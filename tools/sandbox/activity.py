"""What the GPU ran during the candidate's forward, as CUPTI recorded it (the worker's side).

Covers `Recorder`: Kineto sessions (torch.profiler's CUDA activity, which is CUPTI)
around the forward calls the judge asks about (every trial call, a sample of timed
calls after the timing rounds, one replay of a timing graph), each entered after a
device sync, so that the judge's own work before it (poisoning, new inputs) stays out,
and left after one, so that every kernel the forward queued is in. It sums the GPU
kernels by name and the copies by kind (DtoH, HtoD, DtoD...) with their bytes, beside
the Python launch counts of the same calls; `probe` runs one session before any
candidate code, so the judge knows whether CUPTI works in this process before the
candidate could interfere with it. A Recorder of checked calls (the trials', whether or
not CUPTI records) also opens each call in the worker's launch log, whose signatures
of the checked calls the timed ones are compared with (tools/sandbox/signatures.py).

Facts only: tools/judge/ground_truth.py decides what they mean. Not covered: work the
candidate queues outside a recorded call (another thread or stream after its forward
returned: the static guards' and the host clock's job), and tampering with this
process's profiler, which the static guards reject (tools/guards/tampering.py).
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
import time

_BYTES = re.compile(r'"bytes"\s*:\s*(\d+)')
MAX_NAME_CHARS = 400   # C++ template names run to kilobytes; this keeps them apart


class Recorder:
    """One request's recorded calls (`record()` around each), summed for the judge.
    A recorder made with enabled=False records nothing on CUPTI and reports None;
    with checked=True (the trials') each call is a checked call of the launch log."""

    def __init__(self, worker, enabled: bool, *, checked: bool = True):
        self.worker, self.enabled, self.checked = worker, bool(enabled), checked
        self.kernels: dict[str, int] = {}
        self.copies: dict[str, list[int]] = {}     # kind -> [count, bytes]
        self.launches: dict[str, int] = {}         # the Python hooks' count over the same calls
        self.calls = 0
        self.seconds = 0.0
        self.error: str | None = None
        self.source = "events"

    @contextlib.contextmanager
    def record(self, calls: int = 1):
        """Record the GPU activity of the block (`calls` forward calls) and, for checked
        calls, its launches (one call: a block that raised is not counted)."""
        # (a stand-in worker without a launch log records CUPTI only; the judge then finds
        # no checked calls and says so in its checks)
        log = getattr(self.worker, "launch_log", None) if self.checked else None
        if log is not None:
            log.begin("checked")
        with self._cupti(calls):
            yield
        if log is not None:
            log.end()

    @contextlib.contextmanager
    def _cupti(self, calls: int):
        if not self.enabled or self.error is not None:
            yield
            return
        import torch
        t0 = time.perf_counter()
        torch.cuda.synchronize()   # the judge's work queued before this is not the candidate's
        before = dict(self.worker.launches)
        try:
            prof = _start()
        except Exception as e:  # noqa: BLE001 - a profiler that will not start is a fact for the judge
            self.error = f"the profiler did not start: {type(e).__name__}: {str(e)[:300]}"
            yield
            return
        self.seconds += time.perf_counter() - t0
        failed = True
        try:
            yield
            failed = False
        finally:
            t1 = time.perf_counter()
            try:
                torch.cuda.synchronize()
            except Exception:  # noqa: BLE001 - the forward's own fault is raised by the forward
                pass
            try:
                self._add(_stop(prof))
            except Exception as e:  # noqa: BLE001
                if not failed:
                    self.error = f"the profiler did not stop cleanly: {type(e).__name__}: {str(e)[:300]}"
            self.calls += calls
            for k, v in self.worker.launches.items():
                if v > before.get(k, 0):
                    self.launches[k] = self.launches.get(k, 0) + v - before.get(k, 0)
            self.seconds += time.perf_counter() - t1

    def _add(self, records) -> None:
        kernels, copies, source = records
        self.source = source if source != "events" else self.source
        for name, n in kernels.items():
            self.kernels[name] = self.kernels.get(name, 0) + n
        for kind, (n, nbytes) in copies.items():
            c = self.copies.setdefault(kind, [0, 0])
            c[0] += n
            c[1] += nbytes

    def facts(self) -> dict | None:
        if not self.enabled:
            return None
        if self.error is not None:
            return {"ok": False, "error": self.error, "calls": self.calls}
        return {"ok": True, "kernels": self.kernels, "launches": self.launches, "calls": self.calls,
                "copies": {k: {"count": n, "bytes": b} for k, (n, b) in self.copies.items()},
                "record_s": round(self.seconds, 4), "source": self.source}


def probe() -> dict:
    """One session around a fill, before any candidate code: does CUPTI see kernels in
    this process, and what does its first session cost (CUPTI's set-up)?"""
    try:
        import torch
        t0 = time.perf_counter()
        torch.cuda.init()
        x = torch.empty(1024, device="cuda")
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        prof = _start()
        x.fill_(1.0)
        torch.cuda.synchronize()
        kernels, copies, _ = _stop(prof)
        t2 = time.perf_counter()
        prof = _start()   # a second, warm session: what each recorded call costs
        x.fill_(2.0)
        torch.cuda.synchronize()
        _stop(prof)
        t3 = time.perf_counter()
    except Exception as e:  # noqa: BLE001 - no CUPTI here is a fact, not a worker failure
        return {"ok": False, "error": f"{type(e).__name__}: {str(e)[:300]}"}
    seen = sum(kernels.values())
    return {"ok": seen > 0, "kernels_seen": seen, "cuda_init_s": round(t1 - t0, 4),
            "first_session_s": round(t2 - t1, 4), "warm_session_s": round(t3 - t2, 4),
            **({} if seen else {"error": "CUPTI recorded no kernel for a fill"})}


def replay_graph(graph) -> None:
    """One replay of tools/perf/timer.py's CapturedGraph on its own stream."""
    graph.replay()


def _start():
    from torch.autograd.profiler import profile
    prof = profile(use_cpu=False, use_device="cuda", use_kineto=True)
    prof.__enter__()
    return prof


def _stop(prof) -> tuple[dict, dict, str]:
    """({kernel name: launches}, {copy kind: (count, bytes)}, where the bytes came from)."""
    prof.__exit__(None, None, None)
    from torch.autograd import DeviceType
    kernels: dict[str, int] = {}
    copies: dict[str, list[int]] = {}
    unknown = 0
    for e in prof.kineto_results.events():
        if e.device_type() != DeviceType.CUDA:
            continue
        name = e.name()
        if name.startswith("Memcpy ") or name.startswith("Memset"):
            kind = name.split()[1] if name.startswith("Memcpy ") else "Memset"
            m = _BYTES.search(e.metadata_json() or "")
            c = copies.setdefault(kind, [0, 0])
            c[0] += 1
            if m:
                c[1] += int(m.group(1))
            else:
                unknown += 1
        else:
            key = name[:MAX_NAME_CHARS]
            kernels[key] = kernels.get(key, 0) + 1
    if not unknown:
        return kernels, {k: tuple(v) for k, v in copies.items()}, "events"
    return kernels, _copies_from_trace(prof), "trace"


def _copies_from_trace(prof) -> dict:
    """Copy sizes from the exported trace, where a Kineto build keeps them out of its events."""
    fd, path = tempfile.mkstemp(prefix="krefine-activity-", suffix=".json", dir=os.getcwd())
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path, encoding="utf-8") as f:
            trace = json.load(f)
    finally:
        os.unlink(path)
    copies: dict[str, list[int]] = {}
    for e in trace.get("traceEvents", []):
        if e.get("ph") == "X" and e.get("cat") in ("gpu_memcpy", "gpu_memset"):
            name = e.get("name", "")
            kind = name.split()[1] if name.startswith("Memcpy ") and len(name.split()) > 1 else "Memset"
            c = copies.setdefault(kind, [0, 0])
            c[0] += 1
            c[1] += int((e.get("args") or {}).get("bytes", 0) or 0)
    return {k: tuple(v) for k, v in copies.items()}


TIMED_SAMPLE_CALLS = 4   # batched: at most this many calls recorded after the rounds


def record_timed(worker, h: dict, call, reps: int) -> dict | None:
    """After a timing request's rounds, when the judge asks: `call` (the timed callable, on
    the timed inputs) recorded once, or a few times for the batched measure, or, with
    call None, one replay of the timing graph (`reps` calls). Nothing tells these calls
    from the timed ones before them, so work done only when not under test shows here."""
    rec = Recorder(worker, h.get("activity"), checked=False)   # `call` opens its own timed calls
    if not rec.enabled:
        return None
    if call is None:
        with rec.record(calls=reps):
            replay_graph(worker._graph[1])
    else:
        n = max(1, min(reps, TIMED_SAMPLE_CALLS))
        with rec.record(calls=n):
            for _ in range(n):
                call()
    return rec.facts()
