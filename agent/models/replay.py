"""The replay:FILE backend: recorded completions handed out in order (`ReplayBackend`),
from a JSONL file (a "completion" string per line) or a run directory's own
completions; ReplayExhausted when used up.

Apart from agent/models/llm.py because it is the one backend that reads files of ours (replay
files, and run directories through agent/loop/rundir.py) and needs no model at all.
"""
from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from agent.config import SamplingConfig
from agent.models.base import Completion, ReplayExhausted, estimate_tokens
from agent.loop.rundir import RunDir
from tools.errors import BadInput


class ReplayBackend:
    """Recorded completions handed out in file order, one per requested candidate.

    `position` counts the completions handed out; a resumed run sets it back with
    `seek(n)` so it does not replay the same completions twice.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path).expanduser()   # a replay file, or a run directory (its completions/ and trace)
        self.name = f"replay:{self.path}"
        self.records = _read_run(self.path) if self.path.is_dir() else _read_replay(self.path)
        self.position = 0
        self._lock = threading.Lock()

    def load(self) -> None:
        """Nothing to do: the file was read and checked by the constructor."""

    def seek(self, position: int) -> None:
        self.position = max(0, min(position, len(self.records)))

    def generate(self, prompt: str, n: int, sampling: SamplingConfig) -> list[Completion]:
        with self._lock:
            if self.position >= len(self.records):
                raise ReplayExhausted(f"{self.path}: all {len(self.records)} recorded completions are used")
            taken = self.records[self.position:self.position + n]
            self.position += len(taken)
        return [Completion(
            text=r["completion"], prompt_tokens=estimate_tokens(prompt),
            completion_tokens=r["completion_tokens"] if isinstance(r.get("completion_tokens"), int)
            else estimate_tokens(r["completion"]),
            model=r["model"] if isinstance(r.get("model"), str) else self.name,
            finish_reason=r["finish_reason"] if isinstance(r.get("finish_reason"), str) else None)
            for r in taken]

    def count_tokens(self, text: str) -> int:
        return estimate_tokens(text)


def _read_run(path: Path) -> list[dict]:
    """A run directory's completions (agent/loop/rundir.py `RunDir.completions`)."""
    rd = RunDir(path)
    if not rd.trace.exists():
        raise BadInput(path, "not a run directory (no trace.jsonl) and not a replay file")
    try:
        records = rd.completions()
    except OSError as e:
        raise BadInput(path, f"cannot read a recorded completion: {e}") from None
    if not records:
        raise BadInput(path, "the run holds no completions of a model")
    return records


def _read_replay(path: Path) -> list[dict]:
    if path.exists() and not path.is_file() and not path.is_dir():   # a FIFO or a device: read forever
        raise BadInput(path, "replay path is not a regular file")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadInput(path, "no such replay file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise BadInput(path, f"cannot read the replay file: {e}") from None
    lines = text.split("\n")
    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            if number == len(lines):        # no newline after it: a write torn by a crash
                break
            raise BadInput(path, f"line {number}: not JSON ({e.msg}); expected one object per line") from None
        if not isinstance(record, dict) or not isinstance(record.get("completion"), str):
            raise BadInput(path, f'line {number}: expected an object with a "completion" string')
        records.append(record)
    if not records:
        raise BadInput(path, 'holds no completions (one JSON object with a "completion" string per line)')
    return records
