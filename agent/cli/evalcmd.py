"""`krefine eval PROBLEM CANDIDATE [CANDIDATE ...]`: judge candidates, print their verdicts.

Several candidates share one judge session (tools/judge/pool.py): the reference, the
baselines and the warm worker pool are made once, and compile phases overlap. By default
the session lives in the judge service (tools/judge/service.py, started on first use,
gone `--keep-judge` seconds after the last eval), so the next `krefine eval` of the same
problem finds it warm and this process never imports torch; `--keep-judge 0` judges
here, in a session of this process's own. Either way the steps are the same (`_eval`):
what the files alone decide is decided here without importing torch (the problem is
loaded, and torch asked about the device, only when a candidate is judged), only the
rest goes to the session.

--min-speedup X is krefine run's target speedup (its --target-speedup), given per call:
without it correct is enough, whatever [budget] target_speedup says.

Exit statuses (docs/DESIGN.md): 0 correct (and at least --min-speedup when given; with
several candidates, every one), 1 evaluated but not correct / not fast enough, 2 bad
input, 3 evaluator failure. A candidate file that is not Python defining ModelNew (a
syntax error, an empty file) is that candidate's compile_error, never exit 2, alone or in
a batch: each candidate is a model's answer and gets its own verdict.
"""
from __future__ import annotations

import contextlib
import json
import os
import sys
import threading

from tools.errors import EXIT_FAIL, EXIT_OK, BadInput
from tools.verdict import Verdict


def main(args) -> int:
    import argparse
    from agent.cli import flag_overrides
    from agent.config import load_config
    # --device is [run] device, as for krefine run: the flag, else a --set, else the file's,
    # else whatever is present
    config = load_config(args.config, *flag_overrides(args, {"--device": "run.device"}))
    # the verdicts go to stdout alone: what the problem's or a candidate's code prints in this
    # process (an import, get_inputs) goes to stderr, so --json stays one object per line
    keep = _keep_s(args, config)
    # 0) judged here: the workers' fork server imports torch and triton (seconds) while
    #    this process imports torch to load the problem: the imports overlap
    guess, early = _early_forkserver(args, here=keep == 0)
    try:
        with _verdicts_alone_on_stdout() as out, contextlib.redirect_stdout(sys.stderr):
            args = argparse.Namespace(**{**vars(args), "device": config.run.device, "stdout": out})
            return _eval(args, config, keep, guess, early)
    finally:
        if early is not None:
            early.close()   # the session closed it already, unless no session was made


@contextlib.contextmanager
def _verdicts_alone_on_stdout():
    """The stream verdicts are printed to: stdout, whose descriptor meanwhile points at stderr,
    so what code writes to descriptor 1 itself (os.write(1, ...) at a problem's import) stays
    out of it too. Where stdout is not descriptor 1 (a test's capture), stdout as it is."""
    try:
        real = sys.stdout.fileno() == 1
    except (AttributeError, OSError, ValueError):
        real = False
    if not real:
        yield sys.stdout
        return
    sys.stdout.flush()
    out = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)
    try:
        yield out
    finally:
        out.flush()
        os.dup2(out.fileno(), 1)
        out.close()


def _keep_s(args, config) -> float:
    """The service's idle life: --keep-judge, else KREFINE_KEEP_JUDGE_S, else [eval] keep_judge_s."""
    source = "--keep-judge"
    if args.keep_judge is not None:
        keep = args.keep_judge
    elif os.environ.get("KREFINE_KEEP_JUDGE_S"):
        source = "KREFINE_KEEP_JUDGE_S"
        try:
            keep = float(os.environ["KREFINE_KEEP_JUDGE_S"])
        except ValueError:
            raise BadInput("", f"KREFINE_KEEP_JUDGE_S must be a number of seconds, "
                               f"got {os.environ['KREFINE_KEEP_JUDGE_S']!r}") from None
    else:
        keep = config.eval.test.keep_judge_s
    from tools.settings import MAX_KEEP_JUDGE_S
    if not 0 <= keep <= MAX_KEEP_JUDGE_S:
        raise BadInput("", f"{source} must be between 0 and {MAX_KEEP_JUDGE_S:g} seconds, got {keep:g}")
    return keep


def _eval(args, config, keep: float, guess: str, early) -> int:
    """One path for both hosts of the session: this process's (keep 0) or the judge
    service's (tools/judge/service.py); only step 3 differs."""
    from tools.judge.static import static_verdict
    from tools.problem import read_problem
    here = keep == 0
    # 1) inputs: every fault that needs no torch to find is one line and exit 2, before any
    #    work starts; loading the problem and asking torch about the device wait for step 3
    #    (as the service does them): a candidate refused in step 2 needs neither
    problem_path, _ = read_problem(args.problem)
    cands = _read_candidates(args)
    _check_target_speedup(args)
    device = _device(args, guess, here)
    say = None if args.json else (lambda what: print(f"krefine: {what} ...", file=sys.stderr, flush=True))
    if say:
        say(_judging(args, cands, problem_path.stem if here else None, device))

    # 2) what the files alone decide (no candidate, a syntax error, a static guard's
    #    reject) needs no session, no service and no torch
    names = _names(len(cands))
    out = _InOrder(args, [path for path, _, _ in cands])
    for i, v in _file_verdicts(cands, names, config.eval, device, args.gpu).items():
        out.heard(i, v)
    for i, (_, src, fault) in enumerate(cands):
        quick = static_verdict(src, names[i], config.eval, device, args.gpu) if fault is None else None
        if quick is not None:
            out.heard(i, quick)

    # 3) the rest in one session, so compile phases overlap
    rest = out.undecided()
    todo = [(names[i], cands[i][1]) for i in rest]
    heard = lambda j, v: out.heard(rest[j], v)   # noqa: E731
    profile = not args.no_profile and config.eval.test.profile != "none"
    if say and len(cands) > 1:   # the judge names each line's candidate by its file name here: the user's path
        say = _naming(say, {names[i]: cands[i][0] for i in rest})
    if rest and here:
        from tools.problem import load_problem
        problem = load_problem(args.problem)
        device = _device_here(args)
        _judge_here(problem, todo, device, args.gpu, config.eval, profile, say, heard,
                    early if device == guess else None)
    elif rest:
        _judge_in_service(args, todo, device, config, keep, profile, say, heard)

    # 4) exit status
    return _exit_status(args, out.verdicts())


def _judging(args, cands, problem_name: str | None, device: str) -> str:
    """The progress line that opens an eval (`problem_name`: None in the judge service)."""
    if problem_name is None:
        return (f"judging {len(cands)} candidate{'s' if len(cands) > 1 else ''} against "
                f"{os.path.basename(args.problem)} in the judge service")
    if len(cands) == 1:
        return f"judging {cands[0][0]} against {problem_name} on {device}"
    return f"judging {len(cands)} candidates against {problem_name} on {device} in one session"


def _device(args, guess: str, here: bool) -> str:
    """The device as far as it is known without torch: --device, else the guess
    (isolation.guess_device). The service keeps it (and checks cuda itself); here it
    stands until a candidate is judged (`_device_here`: torch decides). Checked now is
    only what needs no torch: a negative --gpu, a GPU index on --device cpu, and
    --min-speedup on cpu (here only when --device says cpu)."""
    if args.gpu < 0 or args.device == "cpu":
        _check_device(args.device or "cpu", args.gpu)
    device = args.device or guess
    _check_cpu_speedup(args, args.device if here else device)
    return device


def _device_here(args) -> str:
    """Judged in this process: torch decides (a fallback to cpu is said) and checks it."""
    from tools.judge import default_device
    device = args.device or default_device()
    if args.device is None and device == "cpu":
        print("krefine: no CUDA device found: judging on cpu with Triton's interpreter "
              "(correctness only, no timing)", file=sys.stderr)
    _check_device(device, args.gpu)
    _check_cpu_speedup(args, device)
    return device


def _check_cpu_speedup(args, device: str) -> None:
    if args.target_speedup is not None and device == "cpu":
        raise BadInput("", "--min-speedup needs --device cuda: nothing is timed on cpu")


def _judge_here(problem, todo, device: str, gpu_index: int, settings, profile: bool, say, heard, server) -> None:
    """In a session of this process's own (tools/judge/pool.py), its fork server the
    one started before torch was imported (`server`; None: it starts its own)."""
    from tools.judge.pool import SessionCache, SessionKey, problem_id
    key = SessionKey(problem_id(problem.path, problem.source), settings, device, gpu_index)
    with SessionCache(keep=0, forkservers={device: server} if server is not None else {}) as cache:
        with cache.use(key, lambda: problem) as judge:
            judge.judge_many(todo, profile=profile, progress=say, on_verdict=heard)


def _judge_in_service(args, todo, device: str, config, keep: float, profile: bool, say, heard) -> None:
    """In the warm judge service (started if none answers): verdicts come as documents."""
    import dataclasses
    from tools.judge import client
    settings = {"eval": {k: v for k, v in dataclasses.asdict(config.eval.test).items() if k != "keep_judge_s"},
                "timing": dataclasses.asdict(config.eval.timing), "guards": dataclasses.asdict(config.eval.guards)}

    def started(pid: int) -> None:   # what this eval leaves running, and how to end it
        print(f"krefine: left the judge service for {device}:{args.gpu} running (pid {pid}); it exits "
              f"after {keep:g} s without an eval, `krefine judge stop` ends it now", file=sys.stderr, flush=True)
    client.judge_via_service(args.problem, todo, device=device, service_device=args.device or "auto",
                             gpu_index=args.gpu, settings=settings, profile=profile, idle_s=keep, say=say,
                             on_verdict=heard, on_start=started)


def _read_candidates(args) -> list[tuple[str, str, str | None]]:
    """(path, source, fault) per candidate, fault being why the file is not Python that
    defines ModelNew. Each candidate is a model's answer and gets a verdict of its own, so
    such a file is that candidate's compile_error (_file_verdicts), one candidate or many;
    only a path that names no readable file is the command line's fault (exit 2)."""
    from tools.problem import read_candidate
    return [(path, *read_candidate(path)) for path in args.candidates]


def _file_verdicts(cands, names: list[str], settings, device: str, gpu_index: int) -> dict[int, Verdict]:
    """The compile_error verdict of each candidate whose file is not Python defining ModelNew."""
    from tools.judge.static import file_verdict
    return {i: file_verdict(src, fault, names[i], settings, device, gpu_index)
            for i, (_, src, fault) in enumerate(cands) if fault is not None}


def _naming(say, paths: dict[str, str]):
    """`say` with "candidate3.py: compile" told as "/the/user's/path.py: compile"."""
    def said(what: str) -> None:
        name, sep, rest = what.partition(": ")
        say(f"{paths[name]}: {rest}" if sep and name in paths else what)
    return said


def _names(n: int) -> list[str]:
    """The file name each candidate is judged under (tracebacks name it, never the user's path)."""
    return ["candidate.py"] if n == 1 else [f"candidate{i}.py" for i in range(n)]


def _check_target_speedup(args) -> None:
    if args.target_speedup is not None and args.target_speedup <= 0:
        raise BadInput("", f"--min-speedup must be positive, got {args.target_speedup:g}")


def _check_device(device: str, gpu_index: int) -> None:
    """--device and --gpu name something this machine has, else one line and exit 2."""
    from tools.sandbox.isolation import device_fault
    fault = device_fault(device, gpu_index)
    if fault is not None:
        raise BadInput("", fault)


class _InOrder:
    """Prints each verdict as soon as every candidate before it has been printed (the
    judge finishes them in any order, from several threads)."""

    def __init__(self, args, paths: list[str]):
        self.args, self.paths = args, paths
        self.ready: dict[int, Verdict | dict] = {}
        self.printed = 0
        self.lock = threading.Lock()

    def heard(self, i: int, verdict) -> None:
        with self.lock:
            self.ready[i] = verdict
            while self.printed in self.ready:
                _report(self.args, self.paths[self.printed], self.ready[self.printed], many=len(self.paths) > 1)
                self.printed += 1

    def undecided(self) -> list[int]:
        return [i for i in range(len(self.paths)) if i not in self.ready]

    def verdicts(self) -> list[Verdict]:
        return [v if isinstance(v, Verdict) else Verdict.from_json(v)
                for v in (self.ready[i] for i in range(len(self.paths)))]


def _exit_status(args, verdicts) -> int:
    """0 only when every candidate is correct (and fast enough: the low end of its
    speedup interval over eager above --min-speedup, tools/perf/speedup.py)."""
    if args.target_speedup is None:
        return EXIT_OK if all(v.correct for v in verdicts) else EXIT_FAIL
    from tools.perf.speedup import clears
    ok = all(v.correct and clears(v.speedup_interval.get("eager"), args.target_speedup) for v in verdicts)
    return EXIT_OK if ok else EXIT_FAIL


def _early_forkserver(args, here: bool):
    """(the device guessed, a fork server started for it, or None where fork servers
    cannot work or the service judges). The guess imports no torch: --device, else
    isolation.guess_device."""
    from tools.sandbox.isolation import guess_device, start_forkserver
    guess = args.device or guess_device()
    return guess, start_forkserver(guess, args.gpu) if here else None


def _report(args, path: str, verdict, *, many: bool) -> None:
    """Print one verdict (a Verdict, or the service's verdict document, kept as sent)."""
    if isinstance(verdict, dict):
        doc, verdict = verdict, Verdict.from_json(verdict)
    else:
        doc = verdict.to_json()
    out = getattr(args, "stdout", None) or sys.stdout
    if args.json:
        if many:
            doc = {"candidate": str(path), **doc}
        print(json.dumps(doc, indent=None, default=str), file=out, flush=True)
    else:
        if many:
            print(f"== {path}", file=out)
        print(render(verdict), file=out, flush=True)


def render(v: Verdict) -> str:
    """Human-readable verdict: status, speedups, diagnostics, bottleneck."""
    lines = [f"verdict: {v.status.value}"]
    cand = v.timing.get("candidate") if v.timing else None
    if cand is not None:
        eager, comp = v.timing.get("eager"), v.timing.get("compile")
        lines.append(f"time:    candidate {cand.median_ms:.4f} ms (p20-p80 {cand.p20_ms:.4f}-{cand.p80_ms:.4f}, n={cand.n})")
        if eager is not None:
            lines.append(f"         eager     {eager.median_ms:.4f} ms   speedup {_x(v.speedup_eager)}"
                         + _interval(v.speedup_interval.get("eager")))
        if comp is not None:
            lines.append(f"         compile   {comp.median_ms:.4f} ms   speedup {_x(v.speedup_compile)}"
                         + _interval(v.speedup_interval.get("compile")))
        measure = v.checks.get("timing_measure")
        if measure and measure != "per_call":
            per_call = v.checks.get("timing_per_call_ms", {}).get("candidate")
            lines.append(f"         measure {measure} ({v.checks.get('timing_reps')} calls per sample)"
                         + (f"; one call with a device sync: {per_call:.4f} ms" if per_call else ""))
        gpu = v.device.get("name") or v.device.get("nvml_name")
        if gpu:
            lines.append(f"gpu:     {gpu}, SM {v.device.get('sm_clock_mhz', '?')} MHz, "
                         f"throttle: {', '.join(v.device.get('throttle_reasons') or []) or 'none'}")
    for k in v.kernels:
        if k.get("ok", True) and k.get("name"):
            regs = k.get("n_regs")
            spills = k.get("n_spills", k.get("spills"))
            lines.append(f"kernel:  {k['name']}: {regs if regs is not None else '?'} registers, "
                         f"{spills if spills is not None else '?'} spills, {k.get('num_warps', '?')} warps"
                         + (f" ({k['arch']})" if k.get("arch") else ""))
    if v.status.value == "correct" and cand is None:
        lines.append("time:    not measured (--device cpu runs Triton's interpreter)")
    for d in v.diagnostics:
        where = f" [line {d.line}]" if d.line else ""
        lines.append(f"- {d.kind}{where}: {d.message}")
        if d.source_line:
            lines.append(f"    {d.source_line}")
    if v.bottleneck:
        try:
            from tools.perf.bottleneck import describe
            lines.append("bottleneck: " + describe(v.bottleneck))
        except (ImportError, AttributeError, KeyError, TypeError):
            lines.append(f"bottleneck: {v.bottleneck.get('class', '?')}")
    if v.flags:
        lines.append("flags:   " + ", ".join(v.flags))
    if v.checks.get("portable_form"):
        lines.append("note:    judged the file's portable form: its KernelBook imports of torch's private runtime "
                     "(grid, triton_helpers, empty_strided_cuda, device 0) replaced by definitions in the file, as "
                     "krefine run stores and delivers candidates; line numbers above are that form's")
    return "\n".join(lines)


def _x(s: float | None) -> str:
    return f"{s:.2f}x" if s is not None else "n/a"


def _interval(iv: dict | None) -> str:
    """ ' [0.97-1.04, undecided]': the speedup's interval over rounds and the decision vs 1x."""
    if not iv:
        return ""
    return f"  [{iv['low']:.2f}-{iv['high']:.2f}, {iv.get('faster', '?').replace('_', ' ')}]"
