"""`krefine eval PROBLEM CANDIDATE [CANDIDATE ...]`: judge candidates, print their verdicts.

Several candidates share one judge session (tools/judge/service.py): the reference, the
baselines and the warm worker pool are made once, and compile phases overlap. By default
the session lives in the judge service (tools/judge/daemon.py, started on first use,
gone `--keep-judge` seconds after the last eval), so the next `krefine eval` of the same
problem finds it warm and this process never imports torch; `--keep-judge 0` judges
here, in a session of this process's own.

Exit statuses (DESIGN.md): 0 correct (and at least --min-speedup when given; with
several candidates, every one), 1 evaluated but not correct / not fast enough, 2 bad
input, 3 evaluator failure.
"""
from __future__ import annotations

import json
import os
import sys

from tools.errors import EXIT_FAIL, EXIT_OK, BadInput
from tools.verdict import Verdict


def main(args) -> int:
    from agent.config import load_config
    config = load_config(args.config)
    keep = _keep_s(args, config)
    if keep > 0:
        return _via_service(args, config, keep)
    # 0) the workers' fork server imports torch and triton (~5 s on a GPU image) while this
    #    process imports torch to load the problem: the two imports overlap
    guess, early = _early_forkserver(args)
    try:
        return _main(args, config, guess, early)
    finally:
        if early is not None:
            early.close()   # the session closed it already, unless no session was made


def _keep_s(args, config) -> float:
    """The service's idle life: --keep-judge, else KREFINE_KEEP_JUDGE_S, else [eval] keep_judge_s."""
    if args.keep_judge is not None:
        keep = args.keep_judge
    elif os.environ.get("KREFINE_KEEP_JUDGE_S"):
        try:
            keep = float(os.environ["KREFINE_KEEP_JUDGE_S"])
        except ValueError:
            raise BadInput("", f"KREFINE_KEEP_JUDGE_S must be a number of seconds, "
                               f"got {os.environ['KREFINE_KEEP_JUDGE_S']!r}") from None
    else:
        keep = config.eval.test.keep_judge_s
    from tools.settings import MAX_KEEP_JUDGE_S
    if not 0 <= keep <= MAX_KEEP_JUDGE_S:
        raise BadInput("", f"--keep-judge must be between 0 and {MAX_KEEP_JUDGE_S:g} seconds, got {keep:g}")
    return keep


def _via_service(args, config, keep: float) -> int:
    """Judge in the warm judge service (started if none answers); print as _main does."""
    import dataclasses
    from tools.judge.static import static_verdict
    from tools.problem import load_candidate, read_problem
    from tools.sandbox.isolation import guess_device
    read_problem(args.problem)   # what needs no torch; the service loads it (exit 2 either way)
    sources = [(path, load_candidate(path)) for path in args.candidates]
    if args.min_speedup is not None and args.min_speedup <= 0:
        raise BadInput("", f"--min-speedup must be positive, got {args.min_speedup:g}")
    guess = args.device or guess_device()
    if args.min_speedup is not None and guess == "cpu":
        raise BadInput("", "--min-speedup needs --device cuda: nothing is timed on cpu")
    settings = {"eval": {k: v for k, v in dataclasses.asdict(config.eval.test).items() if k != "keep_judge_s"},
                "timing": dataclasses.asdict(config.eval.timing), "guards": dataclasses.asdict(config.eval.guards)}
    profile = not args.no_profile and config.eval.test.profile != "none"
    say = None if args.json else (lambda what: print(f"krefine: {what} ...", file=sys.stderr, flush=True))
    if say:
        say(f"judging {len(sources)} candidate{'s' if len(sources) > 1 else ''} against "
            f"{os.path.basename(args.problem)} in the judge service")
    names = [f"candidate{i}.py" if len(sources) > 1 else "candidate.py" for i in range(len(sources))]
    printed = [0]
    ready: dict[int, Verdict | dict] = {}

    def heard(i: int, verdict) -> None:   # print in input order, as soon as possible
        ready[i] = verdict
        while printed[0] in ready:
            _report(args, sources[printed[0]][0], ready[printed[0]], many=len(sources) > 1)
            printed[0] += 1
    # a syntax error or a static guard's reject is decided here, before any service or torch
    for i, (_, src) in enumerate(sources):
        quick = static_verdict(src, names[i], config.eval, guess, args.gpu)
        if quick is not None:
            heard(i, quick)
    rest = [i for i in range(len(sources)) if i not in ready]
    if rest:
        from tools.judge import remote
        remote.evaluate(args.problem, [(names[i], sources[i][1]) for i in rest],
                        device=guess, service_device=args.device or "auto", gpu_index=args.gpu,
                        settings=settings, profile=profile, idle_s=keep, say=say,
                        on_verdict=lambda j, doc: heard(rest[j], doc))
    verdicts = [v if isinstance(v, Verdict) else Verdict.from_json(v) for v in (ready[i] for i in range(len(sources)))]
    return _exit_status(args, verdicts)


def _exit_status(args, verdicts) -> int:
    """0 only when every candidate is correct (and fast enough: the low end of its
    speedup interval over eager above --min-speedup, tools/perf/speedup.py)."""
    if args.min_speedup is None:
        return EXIT_OK if all(v.correct for v in verdicts) else EXIT_FAIL
    from tools.perf.speedup import clears
    ok = all(v.correct and clears(v.speedup_interval.get("eager"), args.min_speedup) for v in verdicts)
    return EXIT_OK if ok else EXIT_FAIL


def _early_forkserver(args):
    """(the device guessed, a fork server started for it or None where fork servers
    cannot work). The guess imports no torch: --device, else isolation.guess_device."""
    from tools.sandbox.isolation import guess_device, start_forkserver
    guess = args.device or guess_device()
    return guess, start_forkserver(guess, args.gpu)


def _main(args, config, guess: str, early) -> int:
    from tools.judge import Judge, default_device, evaluate
    from tools.problem import load_candidate, load_problem

    # 1) inputs: every fault here is one line and exit 2, before any work starts
    problem = load_problem(args.problem)
    sources = [(path, load_candidate(path)) for path in args.candidates]
    if args.min_speedup is not None and args.min_speedup <= 0:
        raise BadInput("", f"--min-speedup must be positive, got {args.min_speedup:g}")
    device = args.device or default_device()
    if args.device is None and device == "cpu":
        print("krefine: no CUDA device found: judging on cpu with Triton's interpreter "
              "(correctness only, no timing)", file=sys.stderr)
    if device == "cuda":
        import torch
        if not torch.cuda.is_available():
            raise BadInput("", "--device cuda but no CUDA device is visible (use --device cpu)")
    if args.min_speedup is not None and device == "cpu":
        raise BadInput("", "--min-speedup needs --device cuda: nothing is timed on cpu")
    profile = not args.no_profile and config.eval.test.profile != "none"
    server = early if device == guess else None   # a wrong guess: the session starts its own

    # 2) judge: one candidate in a session of its own; several in one shared session
    say = None if args.json else (lambda what: print(f"krefine: {what} ...", file=sys.stderr, flush=True))
    if len(sources) == 1:
        path, src = sources[0]
        if say:
            say(f"judging {path} against {problem.name} on {device}")
        verdicts = [evaluate(problem, src, device=device, settings=config.eval, profile=profile,
                             gpu_index=args.gpu, progress=say, forkserver=server)]
        _report(args, path, verdicts[0], many=False)
    else:
        if say:
            say(f"judging {len(sources)} candidates against {problem.name} on {device} in one session")
        ready: dict[int, Verdict] = {}
        printed = [0]

        def heard(i: int, v: Verdict) -> None:  # print in input order, as soon as possible
            ready[i] = v
            while printed[0] in ready:
                _report(args, sources[printed[0]][0], ready[printed[0]], many=True)
                printed[0] += 1
        with Judge(problem, device=device, gpu_index=args.gpu, settings=config.eval,
                   forkservers={device: server} if server is not None else None) as judge:
            verdicts = judge.judge_many([(f"candidate{i}.py", src) for i, (_, src) in enumerate(sources)],
                                        profile=profile, on_verdict=heard)

    # 3) exit status
    return _exit_status(args, verdicts)


def _report(args, path: str, verdict, *, many: bool) -> None:
    """Print one verdict (a Verdict, or the service's verdict document, kept as sent)."""
    if isinstance(verdict, dict):
        doc, verdict = verdict, Verdict.from_json(verdict)
    else:
        doc = verdict.to_json()
    if args.json:
        if many:
            doc = {"candidate": str(path), **doc}
        print(json.dumps(doc, indent=None, default=str), flush=True)
    else:
        if many:
            print(f"== {path}")
        print(render(verdict), flush=True)


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
    return "\n".join(lines)


def _x(s: float | None) -> str:
    return f"{s:.2f}x" if s is not None else "n/a"


def _interval(iv: dict | None) -> str:
    """ ' [0.97-1.04, undecided]': the speedup's interval over rounds and the decision vs 1x."""
    if not iv:
        return ""
    return f"  [{iv['low']:.2f}-{iv['high']:.2f}, {iv.get('faster', '?').replace('_', ' ')}]"
