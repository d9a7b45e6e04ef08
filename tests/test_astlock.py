"""ast.parse in threads: the CPython race of gh-106905 (3.11.0-3.11.7, 3.12.0-3.12.1) never
reaches krefine once `tools` is imported (tools/astlock.py)."""
import subprocess
import sys
import textwrap

import pytest

from tools import astlock

REPO = __import__("pathlib").Path(__file__).resolve().parent.parent

# Four threads parse while cyclic garbage with a yielding finalizer makes the collector switch
# threads in the middle of a conversion; prints how many parses raised SystemError.
WORKLOAD = textwrap.dedent("""
    import ast, gc, sys, threading, time
    if sys.argv[1] == "krefine":
        import tools
    src = "\\n".join(f"def f{i}(x):\\n    return [((x+{i})*2, {{'a': [1, (3, 4)]}}) for _ in range(3)]"
                    for i in range(40))
    class Garbage:
        def __init__(self):
            self.me = self
        def __del__(self):
            time.sleep(0)
    errors = []
    def work():
        for _ in range(100):
            for _ in range(20):
                Garbage()
            try:
                ast.parse(src)
            except SystemError as e:
                errors.append(e)
    gc.set_threshold(20)
    threads = [threading.Thread(target=work) for _ in range(4)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    print(len(errors))
""")

needs_affected = pytest.mark.skipif(not astlock.affected(), reason="this CPython has GH-113035")


def _errors(mode):
    out = subprocess.run([sys.executable, "-c", WORKLOAD, mode], cwd=REPO, capture_output=True,
                         text=True, timeout=120, check=True)
    return int(out.stdout.split()[-1])


@needs_affected
def test_threads_parsing_through_krefine_never_raise_the_recursion_mismatch():
    assert _errors("krefine") == 0


@needs_affected
def test_the_same_threads_without_krefine_hit_the_race_this_guards():
    assert _errors("plain") > 0


def test_the_affected_releases_are_the_ones_before_the_fix():
    assert [astlock.affected(v) for v in [(3, 10, 14), (3, 11, 0), (3, 11, 7), (3, 11, 8),
                                           (3, 12, 1), (3, 12, 2), (3, 13, 0)]] == \
        [False, True, True, False, True, False, False]
