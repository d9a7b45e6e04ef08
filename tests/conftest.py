"""Shared pytest set-up.

- GPU tests skip cleanly on machines without a CUDA device.
- Nothing a test runs writes into the user's home: HOME is a directory of the test's own
  (under pytest's tmp directory) for every test, so krefine's caches (`~/.cache/krefine`: seeds,
  the module table, GPU ceilings), Triton's and Hugging Face's land there, and a test's
  time never depends on whether the user's caches are warm. Code that read `Path.home()`
  when it was imported sees one directory made for the whole run instead.
- Judge sessions shared by verdict-reading tests (tests/shared_judges.py) are closed
  when the process's tests are done.
"""
from __future__ import annotations

import os
import shutil
import tempfile

import pytest

# before any test module imports krefine (module constants read Path.home() at import);
# xdist workers inherit the controller's directory through the environment
_RUN_HOME_VAR = "KREFINE_TEST_RUN_HOME"
_OWN_RUN_HOME = _RUN_HOME_VAR not in os.environ
if _OWN_RUN_HOME:
    os.environ[_RUN_HOME_VAR] = tempfile.mkdtemp(prefix="krefine-tests-home-")
os.environ["HOME"] = os.environ[_RUN_HOME_VAR]


def _has_cuda() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except Exception:
        return False


HAS_CUDA = _has_cuda()


def pytest_collection_modifyitems(config, items):
    if HAS_CUDA:
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU and a CUDA build of torch")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _home_of_its_own(tmp_path_factory, monkeypatch):
    # beside the test's tmp_path, not in it: some tests need tmp_path empty (a run directory)
    monkeypatch.setenv("HOME", str(tmp_path_factory.mktemp("home")))


@pytest.fixture(scope="session", autouse=True)
def _shared_judges_closed():
    yield
    from shared_judges import close_all
    close_all()


def pytest_unconfigure(config):
    if _OWN_RUN_HOME and not hasattr(config, "workerinput"):
        shutil.rmtree(os.environ[_RUN_HOME_VAR], ignore_errors=True)
