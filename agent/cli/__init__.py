"""The `krefine` command line: argument parsing, dispatch, and the exit-status contract.

Each subcommand lives in its own module with `main(args) -> int`; this file only parses
and maps failures to docs/DESIGN.md's exit statuses: BadInput -> one line on stderr, exit 2;
EvaluatorError -> one line, exit 3. Tracebacks only with --debug.
"""
from __future__ import annotations

import argparse
import atexit
import contextlib
import errno
import importlib
import os
import signal
import sys
import threading
import time
import traceback

from tools.errors import EXIT_BAD_INPUT, EXIT_EVALUATOR, BadInput, EvaluatorError, describe_fault
from tools.settings import PRECISION_POLICIES

# subcommand -> module holding its main(args)
COMMANDS = {
    "eval": "agent.cli.evalcmd",
    "run": "agent.cli.runcmd",
    "resume": "agent.cli.runcmd",
    "inspect": "agent.cli.inspect",
    "report": "agent.cli.report",
    "export": "agent.cli.export",
    "bench": "agent.bench.suite",
    "repl": "agent.cli.repl",
    "judge": "agent.cli.judgecmd",
}


def _finite(text: str) -> float:
    """argparse type: a finite number ("nan" and "inf" parse as floats but mean nothing here)."""
    import math
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


# `krefine run`'s flags that set one agent.toml value (TABLE.KEY): a value out of range is
# blamed on the flag, not on the file (agent/config.py load_config's origins); README
# "Configuration" has the table of every knob
RUN_FLAGS = {"--model": "model.id", "--max-iterations": "budget.max_rounds",
             "--candidates": "budget.candidates_per_round", "--target-speedup": "budget.target_speedup",
             "--time-budget": "budget.time_budget_s", "--device": "run.device",
             "--seed-kernel": "search.seed_kernel", "--precision": "eval.precision"}


def flag_overrides(args: argparse.Namespace, flags: dict[str, str]) -> tuple[dict, dict]:
    """load_config's overrides and their origins: `--set TABLE.KEY=VALUE`s (if the command
    has them), then `flags` (a flag given wins over a --set of its key)."""
    from agent.config import parse_assignment
    overrides, origins = {}, {}
    for text in getattr(args, "sets", None) or []:
        key, value = parse_assignment(text, "--set")
        overrides[key], origins[key] = value, f"--set {key}"
    for flag, key in flags.items():
        value = getattr(args, flag.lstrip("-").replace("-", "_"))
        if value is not None or key not in overrides:
            overrides[key], origins[key] = value, flag
    return overrides, origins


class _ModuleHelp(argparse.Action):
    """-h/--help of a subcommand whose module parses its own flags: that module's
    option_parser() help, imported only when asked for."""
    def __init__(self, option_strings, dest, module: str, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="show the flags and exit", **kwargs)
        self.module = module

    def __call__(self, parser, namespace, values, option_string=None):
        importlib.import_module(self.module).option_parser().print_help()
        parser.exit()


class UsageParser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):   # a flag has one spelling: no abbreviations (--seed is not --seed-kernel)
        super().__init__(*args, allow_abbrev=False, **kwargs)

    def error(self, message: str):  # usage errors are bad input too: one line, exit 2
        sub = self.prog.removeprefix("krefine").strip()   # "krefine: error: " is said already
        raise BadInput("", f"{sub}: {message}" if sub else message)


def build_parser() -> argparse.ArgumentParser:
    p = UsageParser(prog="krefine", description="Turn a PyTorch module into fast, correct Triton kernels.")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = p.add_subparsers(dest="command", required=True, parser_class=UsageParser)

    e = sub.add_parser("eval", help="judge candidates against a problem (one verdict each)")
    e.add_argument("problem")
    e.add_argument("candidates", nargs="+", metavar="candidate",
                   help="one or more candidate files, judged in one session (JSON lines with --json)")
    e.add_argument("--device", choices=("cuda", "cpu"), default=None,
                   help="default: cuda if present, else cpu (Triton interpreter, no timing)")
    e.add_argument("--json", action="store_true", help="print each verdict as one JSON object per line")
    e.add_argument("--min-speedup", dest="target_speedup", type=_finite, default=None,
                   metavar="X", help="exit 1 unless correct and at least X times faster than eager (krefine run's "
                                     "--target-speedup; unset: correct is enough, whatever [budget] target_speedup says)")
    e.add_argument("--config", default=None, help="agent.toml to read [eval] [timing] [guards] and [run] device from")
    e.add_argument("--set", action="append", default=[], dest="sets", metavar="TABLE.KEY=VALUE",
                   help="any agent.toml value, as krefine run --set (e.g. eval.module_mode=eval)")
    e.add_argument("--no-profile", action="store_true", help="skip the bottleneck profile step")
    e.add_argument("--gpu", type=int, default=0, help="GPU index")
    e.add_argument("--keep-judge", type=_finite, default=None, metavar="SECONDS",
                   help="[eval] keep_judge_s: judge in a service kept warm this long after the last eval, "
                        "so the next eval is fast (0: judge in this process)")

    r = sub.add_parser("run", help="run the refinement loop on a problem")
    r.add_argument("problem")
    r.add_argument("--config", default=None)
    r.add_argument("--model", default=None,
                   help='[model] id: ID | PATH | openai:URL | replay:FILE | none (no model: the seed and the sweep only)')
    r.add_argument("--seed-kernel", choices=("none", "inductor"), default=None,
                   help='[search] seed_kernel: "inductor" judges torch.compile\'s kernels as round 0 and '
                        'refines them')
    r.add_argument("--max-iterations", type=int, default=None, metavar="N",
                   help="[budget] max_rounds: generate -> judge rounds")
    r.add_argument("--candidates", type=int, default=None, metavar="N", help="[budget] candidates_per_round")
    r.add_argument("--target-speedup", type=_finite, default=None, metavar="X",
                   help="[budget] target_speedup (krefine eval's --min-speedup is the same threshold)")
    r.add_argument("--time-budget", type=_finite, default=None, metavar="SECONDS", help="[budget] time_budget_s")
    r.add_argument("--device", choices=("cuda", "cpu"), default=None, help="[run] device")
    r.add_argument("--precision", choices=PRECISION_POLICIES, default=None,
                   help="[eval] precision: as-run (eager's own error bounds a candidate's) or strict (TF32 off)")
    r.add_argument("--out", default=None, metavar="DIR")
    r.add_argument("--set", action="append", default=[], dest="sets", metavar="TABLE.KEY=VALUE",
                   help="override one agent.toml value, as krefine bench --set (repeatable; a flag above wins)")

    rs = sub.add_parser("resume", help="continue an interrupted run")
    rs.add_argument("run_dir")
    rs.add_argument("--set", action="append", default=[], dest="sets", metavar="budget.KEY=VALUE",
                    help="raise a budget ([budget] keys only): a run stopped by that budget goes on")

    i = sub.add_parser("inspect", help="show a run in the terminal")
    i.add_argument("run_dir")
    i.add_argument("--iteration", "--round", type=int, default=None, metavar="N",
                   help="that round's candidates (--round is the same flag)")
    i.add_argument("--candidate", default=None, metavar="ID")

    rp = sub.add_parser("report", help="write RUN_DIR/report.html")
    rp.add_argument("run_dir")

    x = sub.add_parser("export", help="take a kernel away, or export a run's trace")
    x.add_argument("run_dir")
    what = x.add_mutually_exclusive_group()
    what.add_argument("--kernel", nargs="?", const="best", default=None, metavar="CANDIDATE",
                      help="the run's best kernel (or candidate CANDIDATE) as the standalone file that was "
                           "judged; the default when neither flag is given")
    what.add_argument("--chrome-trace", action="store_true", help="the run's node spans as a Chrome trace")
    x.add_argument("--out", "-o", default=None, metavar="FILE",
                   help="--kernel: write FILE (default: print the source); --chrome-trace: default RUN_DIR/trace.chrome.json")

    # bench's flags are its module's (agent/bench/suite.py option_parser): --help prints them
    b = sub.add_parser("bench", help="run the loop over a suite of problems", add_help=False)
    b.add_argument("-h", "--help", action=_ModuleHelp, module="agent.bench.suite")
    b.add_argument("suite_dir")
    b.add_argument("rest", nargs=argparse.REMAINDER)

    j = sub.add_parser("judge", help="the judge services krefine eval keeps warm: status or stop")
    j.add_argument("action", choices=("status", "stop"))
    j.add_argument("--json", action="store_true", help="status: one JSON object per service")

    rl = sub.add_parser("repl", help="paste a module, stream KernelLLM's kernel")
    rl.add_argument("--model", default=None, help="ID | PATH | openai:URL | replay:FILE")
    rl.add_argument("--config", default=None)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:   # `krefine` alone: what it can do, not argparse's one-line complaint
        build_parser().print_help(sys.stderr)
        return EXIT_BAD_INPUT
    # --debug anywhere (the one-line errors say "run with --debug"): a traceback, then the same exit status
    debug = "--debug" in argv
    argv = [a for a in argv if a != "--debug"]
    terminated = []
    try:
        # SIGTERM (`timeout`, a scheduler, `kill`) unwinds as Ctrl-C does (as the bench's does):
        # judges closed, a run's resume line printed, one line and 130, not a silent 143
        with _sigterm_as_interrupt(terminated):
            args = build_parser().parse_args(argv)
            module = importlib.import_module(COMMANDS[args.command])
            return int(module.main(args) or 0)
    except BadInput as e:
        if debug:
            traceback.print_exc()
        print(f"krefine: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except EvaluatorError as e:
        if debug:
            traceback.print_exc()
        print(f"krefine: evaluator failed: {' '.join(str(e).split())}", file=sys.stderr)
        return EXIT_EVALUATOR
    except KeyboardInterrupt:
        print("krefine: interrupted (SIGTERM)" if terminated else "krefine: interrupted", file=sys.stderr)
        return _without_lingering_threads(130)
    except Exception as e:  # our own bug: still one line and exit 3, traceback with --debug
        if debug:
            traceback.print_exc()
        if isinstance(e, OSError) and e.errno in _PATH_ERRNOS:   # a path the user gave that no system call takes
            print(f"krefine: error: {e.filename}: {e.strerror}", file=sys.stderr)
            return EXIT_BAD_INPUT
        print(f"krefine: internal error: {describe_fault(e)}"
              + ("" if debug else " (run with --debug for the traceback)"), file=sys.stderr)
        return EXIT_EVALUATOR


_PATH_ERRNOS = (errno.ENAMETOOLONG, errno.ELOOP)
LINGER_S = 2.0   # after an interrupt, how long other threads get to finish before the process ends without them


def _without_lingering_threads(code: int) -> int:
    """`code`, once other threads have ended. Python waits at exit for every thread that is
    not a daemon, and one may be running the problem's own code that never returns (a
    forward looping in a judge's thread when Ctrl-C came; a C call no deadline can end):
    past LINGER_S the process ends without it, its atexit cleanup run first."""
    end = time.monotonic() + LINGER_S
    others = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
    for t in others:
        t.join(max(0.0, end - time.monotonic()))
    if any(t.is_alive() for t in others):
        sys.stdout.flush()
        sys.stderr.flush()
        atexit._run_exitfuncs()
        os._exit(code)
    return code


@contextlib.contextmanager
def _sigterm_as_interrupt(terminated: list):
    """SIGTERM raises KeyboardInterrupt (noted in `terminated`) inside the block; the
    handler before it is put back after. Only in the main thread, where handlers live."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        terminated.append(signum)
        raise KeyboardInterrupt
    before = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


if __name__ == "__main__":
    sys.exit(main())
