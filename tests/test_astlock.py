"""ast.parse in threads: the CPython race of gh-106905 (3.11.0-3.11.7, 3.12.0-3.12.1) never
reaches krefine once `tools` is imported (tools/astlock.py)."""
import subprocess
import sys
import textwrap

import pytest

from tools import astlock

REPO = __import__("pathlib").Path(__file__).resolve().parent.parent

# The main thread parses a large source; a collection inside that parse finalizes a Trigger,
# which lets a second thread parse (from another stack depth) and waits for it, 2 s at most:
# without the lock the second parse runs in the middle of the first and the first fails with
# gh-106905's SystemError, every time; with it the second waits for the first. Prints how
# many parses raised SystemError.
WORKLOAD = textwrap.dedent("""
    import ast, gc, sys, threading
    if sys.argv[1] == "krefine":
        import tools
    main = threading.current_thread()
    src = "x = [" + ", ".join(f"({i}, [{i}, {{'k': {i}}}])" for i in range(3000)) + "]"
    reached, finished = threading.Event(), threading.Event()
    errors = []
    class Trigger:
        def __init__(self):
            self.me = self
        def __del__(self):
            if threading.current_thread() is main and not reached.is_set():
                reached.set()
                finished.wait(2.0)
    def deeper(n):
        if n:
            return deeper(n - 1)
        try:
            ast.parse("y = [(1, [2, {'k': 3}])]")
        except SystemError as e:
            errors.append(e)
    def other():
        reached.wait(30)
        deeper(40)
        finished.set()
    t = threading.Thread(target=other)
    t.start()
    gc.collect()
    gc.set_threshold(10)
    Trigger()
    try:
        ast.parse(src)
    except SystemError as e:
        errors.append(e)
    t.join()
    print(len(errors) if reached.is_set() else -1)
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
    assert _errors("plain") == 1


def test_the_affected_releases_are_the_ones_before_the_fix():
    assert [astlock.affected(v) for v in [(3, 10, 14), (3, 11, 0), (3, 11, 7), (3, 11, 8),
                                           (3, 12, 1), (3, 12, 2), (3, 13, 0)]] == \
        [False, True, True, False, True, False, False]
