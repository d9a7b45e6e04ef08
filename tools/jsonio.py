"""JSON and JSONL file I/O used everywhere in krefine: atomic writes, appends that
survive kill -9 (one fsynced line per record), tolerant reads of a torn last line.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """Write via a temp file + rename so readers never see half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; a run's files are for its readers too
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _umask()


def write_json(path: str | os.PathLike, obj: Any) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=False, default=_default) + "\n")


def read_json(path: str | os.PathLike) -> Any:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def read_json_object(path: str | os.PathLike) -> dict:
    """read_json of a file that must hold one JSON object (a run's run.json, summary.json, a
    verdict); DamagedRecord where it holds something else."""
    value = read_json(path)
    if not isinstance(value, dict):
        raise DamagedRecord(path, None, "not a JSON object")
    return value


def append_jsonl(path: str | os.PathLike, obj: Any) -> None:
    """Append one record as one line, fsynced, so a crash loses at most that line."""
    line = json.dumps(obj, default=_default, separators=(",", ":")) + "\n"
    with open(path, "a", encoding="utf-8") as f:
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


class DamagedRecord(ValueError):
    """A JSON-lines file that is not one: a line mid-file that is not JSON or not an object,
    or bytes that are not UTF-8. `path` and `line` (1-based; None: the whole file) say where."""

    def __init__(self, path, line: int | None, why: str):
        self.path, self.line, self.why = str(path), line, why
        super().__init__(f"{path}: {f'line {line}: ' if line else ''}{why}")


def read_jsonl(path: str | os.PathLike) -> Iterator[dict]:
    """Yield records; a torn final line (power loss mid-write) is skipped, not fatal.
    DamagedRecord for anything else that is not one JSON object per line."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.readlines()
    except FileNotFoundError:
        return
    except UnicodeDecodeError:
        raise DamagedRecord(path, None, "not UTF-8 text") from None
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            if i == len(lines) - 1:
                return
            raise DamagedRecord(path, i + 1, f"not valid JSON ({e.msg})") from None
        if not isinstance(record, dict):
            raise DamagedRecord(path, i + 1, f"a JSON {type(record).__name__}, not an object")
        yield record


def _default(obj: Any) -> Any:
    if hasattr(obj, "to_json"):
        return obj.to_json()
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")
