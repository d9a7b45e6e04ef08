"""`python -m tools.dialect`: the KernelBook conversion from the command line.

  python -m tools.dialect seed PROBLEM --device D [--out FILE] [--cache DIR | --block-ops N] [--module-mode M]
  python -m tools.dialect portfolio PROBLEM --device D --out DIR [--cache DIR] [--module-mode M]
  python -m tools.dialect capture PROBLEM --device D --out FILE [--templates] [--module-mode M]
  python -m tools.dialect convert PROBLEM CAPTURE [--out FILE] [--cache DIR]
  python -m tools.dialect blocks PROBLEM --device D --names B,.. --out FILE [--templates] [--module-mode M]

--module-mode (train | eval, default train) is `[eval] module_mode`: the forward compiled
is the module's as constructed (training mode) or after .eval(), as the judge runs it.

With --cache, `seed` and `portfolio` answer from the seed cache (tools/dialect/seedcache.py's
SeedCache) or fill it, and `convert` puts its result (or its reason) in the cache
under the capture's torch version and module mode, as the seed its device would have made.
`blocks` is a block worker of a capture cut into blocks (tools/dialect/blocks.py): it
compiles the named blocks and writes {block: [Inductor module, configs]} as JSON.
`portfolio` writes OUT/portfolio.json, the seed portfolio (tools/dialect/portfolio.py):
[{"label", "code", "reason"}, ...], also when no entry has code (then exit 1); while it
compiles, OUT/portfolio.partial.json holds the entries so far and the configurations still
to come, which a caller whose budget ran out keeps (portfolio.py `partial_portfolio`).
`seed` and `portfolio` are what tools/dialect/seedcache.py's `seed_in_subprocess` and
portfolio.py's `portfolio_in_subprocess` run: a fault prints one line `kernelbook:
<reason>` on stderr (exit 1; a bad problem file, exit 2). The conversion itself is
tools/dialect/kernelbook.py's.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tools.dialect.inductor_capture import capture, capture_text, read_capture
from tools.dialect.kernelbook import convert, guard_rejection
from tools.dialect.portfolio import (FILE_NAME, PARTIAL_FILE, cached_portfolio, entries_json, no_portfolio,
                                     partial_json)
from tools.dialect.seedcache import SeedCache, cached_seed


def main(argv: list[str] | None = None) -> int:
    """python -m tools.dialect seed PROBLEM --device D [--out FILE]
       python -m tools.dialect portfolio PROBLEM --device D --out DIR   (DIR/portfolio.json)
       python -m tools.dialect capture PROBLEM --device D --out FILE   (Inductor code + header)
       python -m tools.dialect convert PROBLEM CAPTURE [--out FILE]"""
    from tools.errors import BadInput
    from tools.problem import load_problem
    ap = argparse.ArgumentParser(prog="python -m tools.dialect")
    ap.add_argument("command", choices=("seed", "portfolio", "capture", "convert", "blocks"))
    ap.add_argument("problem")
    ap.add_argument("capture_file", nargs="?")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--out", help="portfolio: the directory for portfolio.json; else the file to write")
    ap.add_argument("--cache", help="seed / portfolio / convert: the seed cache directory")
    ap.add_argument("--module-mode", choices=("train", "eval"), default="train",
                    help="seed / portfolio / capture: compile the module as constructed (train) or after .eval()")
    ap.add_argument("--templates", action="store_true",
                    help="capture: max-autotune with Inductor's Triton templates for GEMMs and convolutions")
    ap.add_argument("--names", help="blocks: the blocks to compile (submod_0,submod_3)")
    ap.add_argument("--block-ops", type=int, help="seed (no --cache) / blocks: a graph of more ops than this is "
                    "captured block by block (0: never, the default: tools/dialect/blocks.py BLOCK_OPS)")
    args = ap.parse_args(argv)
    if args.command in ("portfolio", "blocks") and not args.out:
        ap.error(f"{args.command} needs --out")
    if args.command == "blocks" and not args.names:
        ap.error("blocks needs --names")
    if args.block_ops is not None and (args.cache or args.command not in ("seed", "blocks") or args.block_ops < 0):
        ap.error("--block-ops N (N >= 0) is for seed without --cache, and blocks")
    # what the problem prints while it loads and compiles goes to stderr: stdout is the seed's
    real_stdout, sys.stdout = sys.stdout, sys.stderr
    try:
        problem = load_problem(args.problem)
        if args.command == "portfolio":
            Path(args.out).mkdir(parents=True, exist_ok=True)

            def progress(done, pending):   # what a budget that runs out later keeps
                tmp = Path(args.out) / (PARTIAL_FILE + ".tmp")
                tmp.write_text(partial_json(done, pending), encoding="utf-8")
                tmp.replace(Path(args.out) / PARTIAL_FILE)
            entries = cached_portfolio(problem, args.device, args.cache, args.module_mode, on_progress=progress)
            (Path(args.out) / FILE_NAME).write_text(entries_json(entries), encoding="utf-8")
            reason = no_portfolio(entries)
            if reason is not None:
                raise ValueError(reason)
            return 0
        if args.command == "convert":
            if not args.capture_file:
                raise ValueError("convert needs a CAPTURE file")
            cap = read_capture(Path(args.capture_file).read_text(encoding="utf-8"))
            try:
                text = convert(problem, cap)
            except ValueError as e:
                if args.cache:
                    SeedCache(args.cache, cap.module_mode).put(problem, cap.device, cap.torch_version,
                                                               None, str(e))
                raise
            if args.cache:
                rejected = guard_rejection(text)
                SeedCache(args.cache, cap.module_mode).put(
                    problem, cap.device, cap.torch_version, text if rejected is None else None,
                    f"the guards would reject it ({rejected})")
        elif args.command == "blocks":
            text = json.dumps(capture(problem, args.device, templates=args.templates, module_mode=args.module_mode,
                                      block_ops=args.block_ops, only=args.names.split(",")))
        elif args.command == "capture":
            text = capture_text(capture(problem, args.device, templates=args.templates,
                                        module_mode=args.module_mode))
        else:
            text = cached_seed(problem, args.device, args.cache, args.module_mode, args.block_ops)
    except (ValueError, BadInput) as e:
        print(f"kernelbook: {e}", file=sys.stderr)
        return 2 if isinstance(e, BadInput) else 1
    finally:
        sys.stdout = real_stdout
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
