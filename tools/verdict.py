"""The verdict: one frozen value per evaluation, whatever happened.

Covers the Status enum, Diagnostic, Timing and Verdict types and their schema-1 JSON
form (docs/DESIGN.md, `krefine eval --json`). Untrusted work returns a Verdict; only the
evaluator's own bugs raise. Does not decide anything: tools/judge/ does.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

SCHEMA = 1


class Status(str, Enum):
    CORRECT = "correct"
    INCORRECT = "incorrect"
    COMPILE_ERROR = "compile_error"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    REJECTED = "rejected"


@dataclass(frozen=True)
class Diagnostic:
    kind: str                      # e.g. syntax_error, triton_compile, guard:torch_compute
    message: str
    line: int | None = None        # 1-based line in the candidate file
    source_line: str | None = None # that line's text, stripped

    def to_json(self) -> dict:
        return {"kind": self.kind, "message": self.message, "line": self.line,
                "source_line": self.source_line}


@dataclass(frozen=True)
class Timing:
    """Summary of one timed callable; all figures in milliseconds."""
    median_ms: float
    mean_ms: float
    min_ms: float
    max_ms: float
    p20_ms: float
    p80_ms: float
    std_ms: float
    n: int

    @classmethod
    def from_samples(cls, samples_ms: list[float]) -> "Timing":
        if not samples_ms:
            raise ValueError("no timing samples")
        s = sorted(samples_ms)
        def q(p: float) -> float:
            return s[min(len(s) - 1, max(0, round(p * (len(s) - 1))))]
        return cls(median_ms=statistics.median(s), mean_ms=statistics.fmean(s),
                   min_ms=s[0], max_ms=s[-1], p20_ms=q(0.2), p80_ms=q(0.8),
                   std_ms=statistics.pstdev(s) if len(s) > 1 else 0.0, n=len(s))

    @property
    def spread(self) -> float:
        """Relative spread (p80 - p20) / median."""
        return (self.p80_ms - self.p20_ms) / self.median_ms if self.median_ms > 0 else math.inf

    def to_json(self) -> dict:
        return {"median": self.median_ms, "mean": self.mean_ms, "min": self.min_ms,
                "max": self.max_ms, "p20": self.p20_ms, "p80": self.p80_ms,
                "std": self.std_ms, "spread": self.spread, "n": self.n}


@dataclass(frozen=True)
class Verdict:
    status: Status
    diagnostics: tuple[Diagnostic, ...] = ()
    flags: tuple[str, ...] = ()
    checks: dict[str, Any] = field(default_factory=dict)
    timing: dict[str, Timing | None] = field(default_factory=dict)  # candidate, eager, compile
    speedup_eager: float | None = None
    speedup_compile: float | None = None
    # per baseline: tools/perf/speedup.py's estimate {ratio, low, high, rounds, method} and
    # "faster" (its decision against 1.0); empty when untimed or the timing is untrusted
    speedup_interval: dict[str, dict] = field(default_factory=dict)
    device: dict[str, Any] = field(default_factory=dict)
    feedback: str = ""
    kernels: tuple[dict, ...] = ()        # per compiled Triton kernel: name, regs, spills, ...
    bottleneck: dict[str, Any] | None = None  # tools/perf/summary.py's summary, when profiled
    duration_s: float = 0.0

    @property
    def correct(self) -> bool:
        return self.status is Status.CORRECT

    def to_json(self) -> dict:
        return {
            "schema": SCHEMA,
            "verdict": self.status.value,
            "correct": self.correct,
            "speedup": {"eager": self.speedup_eager, "compile": self.speedup_compile},
            "speedup_interval": self.speedup_interval,
            "timing_ms": {k: (v.to_json() if v is not None else None)
                          for k, v in (self.timing or {}).items()},
            "checks": self.checks,
            "diagnostics": [d.to_json() for d in self.diagnostics],
            "flags": list(self.flags),
            "feedback": self.feedback,
            "device": self.device,
            "kernels": list(self.kernels),
            "bottleneck": self.bottleneck,
            "duration_s": self.duration_s,
        }

    @classmethod
    def from_json(cls, doc: dict) -> "Verdict":
        if doc.get("schema") != SCHEMA:
            raise ValueError(f"verdict schema {doc.get('schema')!r}, expected {SCHEMA}")
        def timing(t):
            if t is None:
                return None
            return Timing(median_ms=t["median"], mean_ms=t["mean"], min_ms=t["min"],
                          max_ms=t["max"], p20_ms=t["p20"], p80_ms=t["p80"],
                          std_ms=t["std"], n=t["n"])
        return cls(
            status=Status(doc["verdict"]),
            diagnostics=tuple(Diagnostic(**d) for d in doc.get("diagnostics", [])),
            flags=tuple(doc.get("flags", [])),
            checks=doc.get("checks", {}),
            timing={k: timing(v) for k, v in doc.get("timing_ms", {}).items()},
            speedup_eager=doc.get("speedup", {}).get("eager"),
            speedup_compile=doc.get("speedup", {}).get("compile"),
            speedup_interval=doc.get("speedup_interval") or {},
            device=doc.get("device", {}),
            feedback=doc.get("feedback", ""),
            kernels=tuple(doc.get("kernels", [])),
            bottleneck=doc.get("bottleneck"),
            duration_s=doc.get("duration_s", 0.0),
        )
