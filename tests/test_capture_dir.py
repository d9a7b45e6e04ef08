"""tools/dialect/capture_context.py `capture_dir`: one capture's Inductor cache folder, removed after
it, and the empty folders Inductor's compile workers make again after that, swept by a later capture."""
from __future__ import annotations

import os
import tempfile
import time

from tools.dialect.capture_context import STALE_S, capture_dir


def _leftovers(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    root = tmp_path / "krefine-captures"
    old = time.time() - STALE_S - 60
    made = {}
    for name, files in (("stale_empty", False), ("stale_with_files", True), ("fresh_empty", False)):
        d = root / name / "tmpcache"
        d.mkdir(parents=True)
        if files:
            (d / "kernel.py").write_text("")
        if name.startswith("stale"):
            os.utime(root / name, (old, old))
        made[name] = root / name
    return made


def test_a_capture_folder_is_removed_after_the_capture(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with capture_dir() as path:
        assert os.path.isdir(path) and os.path.dirname(path) == str(tmp_path / "krefine-captures")
    assert not os.path.exists(path)


def test_a_capture_sweeps_empty_leftovers_older_than_the_stale_age(tmp_path, monkeypatch):
    made = _leftovers(tmp_path, monkeypatch)
    with capture_dir():
        pass
    assert not made["stale_empty"].exists()


def test_a_capture_keeps_a_folder_holding_files_and_a_recent_empty_one(tmp_path, monkeypatch):
    made = _leftovers(tmp_path, monkeypatch)
    with capture_dir():
        pass
    assert made["stale_with_files"].exists() and made["fresh_empty"].exists()
