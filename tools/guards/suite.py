"""Every static guard, in the order they run, and the call that runs them.

STATIC_GUARDS is a tuple of plain functions `check_x(source, settings) -> Finding |
None`, never looked up by name: a typo cannot switch a guard off. `run_static_guards`
parses once (tools/guards/source.py) and returns every finding, rejecting ones first.
"""
from __future__ import annotations

from typing import Callable

from tools.guards.escapes import (check_concurrency, check_filesystem, check_foreign_kernel, check_network,
                                  check_side_stream)
from tools.guards.flags import check_caching, check_reduced_precision
from tools.guards.host import check_host_transfer
from tools.guards.portability import check_private_runtime
from tools.guards.own_work import check_fallback, check_reference_model, check_triton_kernel
from tools.guards.source import Finding, Source, parse_source
from tools.guards.tampering import (check_disguise, check_monkeypatch, check_op_registration,
                                    check_triton_internals)
from tools.guards.torch_ops import check_torch_compute
from tools.settings import GuardSettings

STATIC_GUARDS: tuple[Callable[[Source, GuardSettings], Finding | None], ...] = (
    check_torch_compute,
    check_host_transfer,
    check_disguise,
    check_fallback,
    check_reference_model,
    check_monkeypatch,
    check_op_registration,
    check_triton_internals,
    check_concurrency,
    check_network,
    check_side_stream,
    check_foreign_kernel,
    check_private_runtime,
    check_filesystem,
    check_triton_kernel,
    check_reduced_precision,
    check_caching,
)


def run_static_guards(src: str, settings: GuardSettings) -> list[Finding]:
    """Every guard's finding, rejecting ones first; [] when `src` does not parse."""
    source = parse_source(src)
    if source is None:
        return []
    try:
        findings = [f for f in (guard(source, settings) for guard in STATIC_GUARDS) if f is not None]
    except RecursionError:   # nesting deeper than the guards can read: refuse, never wave through
        return [Finding("unreadable", "the code is nested too deeply for the guards to read; flatten "
                        "the expressions.", None, True, "unreadable")]
    return sorted(findings, key=lambda f: not f.reject)
