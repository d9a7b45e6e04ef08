"""A candidate the static guards refuse is refused before torch is imported (issue 31).

`krefine eval` decides what the files alone decide (a static guard's reject, a syntax
error) in its own process, reading dotted paths through the installation's module table
(tools/guards/module_table.py) instead of importing torch, triton and numpy; the problem
is loaded, and torch asked about the device, only for a candidate that is judged. The
refusal must be the one a process that imported them gives, and the guards as strict.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from run_fixtures import REPO, cli_env

EXPLOITS = REPO / "tests" / "exploits"
MATMUL = str(EXPLOITS / "problems" / "matmul.py")
RELU = str(EXPLOITS / "problems" / "relu.py")
HEAVY = ("torch", "triton", "numpy")

# krefine eval in this process, then which of HEAVY it imported, as the last stderr line
EVAL = textwrap.dedent("""
    import json, sys
    {first}
    from agent.cli import main
    sys.argv = ["krefine", "eval", *sys.argv[1:]]
    try:
        status = main()
    except SystemExit as e:
        status = e.code
    print(json.dumps({{"status": status, "heavy": sorted(m for m in {heavy} if m in sys.modules)}}),
          file=sys.stderr)
""")


def _eval(*args: str, first: str = "", env: dict | None = None) -> tuple[list[dict], dict]:
    """(the verdict documents printed, {"status", "heavy"}) of krefine eval ... --json."""
    r = subprocess.run([sys.executable, "-c", EVAL.format(first=first, heavy=HEAVY), *args, "--json"],
                       cwd=REPO, env=env or cli_env(), capture_output=True, text=True, timeout=600)
    return [json.loads(ln) for ln in r.stdout.splitlines()], json.loads(r.stderr.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def not_compiling(tmp_path_factory) -> str:
    """Parses, but does not compile: `return` outside a function (the judge's syntax_error)."""
    path = tmp_path_factory.mktemp("cand") / "return_outside.py"
    path.write_text((EXPLOITS / "no_triton_kernel.py").read_text() + "\nreturn None\n")
    return str(path)


@pytest.mark.parametrize("problem, candidate, kind", [
    (MATMUL, "torch_matmul.py", "guard:torch_compute"),
    (MATMUL, "extern_kernels_mm.py", "guard:torch_compute"),
    (RELU, "no_triton_kernel.py", "guard:no_triton_kernel"),
])
@pytest.mark.parametrize("keep", ["0", "300"])   # judged in the eval's process / in the service
def test_a_statically_refused_candidate_is_refused_without_importing_torch(problem, candidate, kind, keep):
    verdicts, run = _eval(problem, str(EXPLOITS / candidate), "--keep-judge", keep)
    assert run == {"status": 1, "heavy": []}
    assert verdicts[0]["verdict"] == "rejected" and kind in [d["kind"] for d in verdicts[0]["diagnostics"]]


def test_a_batch_of_a_syntax_error_and_a_reject_needs_no_torch(not_compiling):
    verdicts, run = _eval(MATMUL, not_compiling, str(EXPLOITS / "torch_matmul.py"))
    assert run == {"status": 1, "heavy": []}
    assert [v["verdict"] for v in verdicts] == ["compile_error", "rejected"]
    assert verdicts[0]["diagnostics"][0]["kind"] == "syntax_error"


@pytest.mark.parametrize("problem, candidate", [(MATMUL, "torch_matmul.py"), (RELU, "r2_static_module_alias.py")])
def test_the_refusal_is_the_one_a_process_that_imported_torch_gives(problem, candidate):
    args = (problem, str(EXPLOITS / candidate), "--keep-judge", "300")   # no early fork server: refused anyway
    light, run = _eval(*args)
    heavy, loaded = _eval(*args, first="import torch, triton, numpy")
    assert run["heavy"] == [] and loaded["heavy"] == sorted(HEAVY)
    for doc in (*light, *heavy):
        doc.pop("duration_s")
    assert light == heavy and light[0]["verdict"] == "rejected"


# every finding of every guard on a file, as read with or without the modules imported
FINDINGS = textwrap.dedent("""
    import json, sys
    {first}
    from tools.guards.suite import run_static_guards
    from tools.settings import GuardSettings
    out = {{p: [list(map(str, (f.guard, f.flag, f.reject, f.line, f.message))) for f in
            run_static_guards(open(p).read(), GuardSettings())] for p in sys.argv[1:]}}
    print(json.dumps({{"findings": out, "torch": "torch" in sys.modules}}))
""")


def test_the_module_table_reads_every_exploit_as_the_imported_modules_do():
    files = sorted(str(p) for p in [*EXPLOITS.glob("*.py"), *(REPO / "examples").glob("*.py")])

    def findings(first: str) -> dict:
        r = subprocess.run([sys.executable, "-c", FINDINGS.format(first=first), *files], cwd=REPO, env=cli_env(),
                           capture_output=True, text=True, timeout=600, check=True)
        return json.loads(r.stdout)
    table, imported = findings(""), findings("import torch")
    assert table["torch"] is False and imported["torch"] is True
    assert table["findings"] == imported["findings"]
    assert sum(any(f[2] == "True" for f in v) for v in table["findings"].values()) >= 40   # rejects among them


def test_without_a_table_one_is_written_by_a_subprocess_and_the_eval_still_imports_no_torch(tmp_path):
    env = {**cli_env(), "HOME": str(tmp_path)}   # module_table.CACHE_DIR is under it
    verdicts, run = _eval(MATMUL, str(EXPLOITS / "torch_matmul.py"), env=env)
    assert run == {"status": 1, "heavy": []} and verdicts[0]["verdict"] == "rejected"
    assert len(list((tmp_path / ".cache" / "krefine").glob("guard-modules-*.marshal"))) == 1


def test_a_reinstalled_package_names_another_table(tmp_path, monkeypatch):
    import importlib.util
    import types

    from tools.guards import module_table
    package = tmp_path / "torch"
    package.mkdir()
    (package / "__init__.py").write_text("")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: types.SimpleNamespace(
        origin=str(package / "__init__.py")) if name == "torch" else real(name))
    before = module_table._table_path()
    os.utime(package, ns=(1, 1))   # what a reinstall does to the package's directory
    assert module_table._table_path() != before
    assert Path(str(before)).parent == module_table.CACHE_DIR
