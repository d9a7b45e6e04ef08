"""Judge temp dirs that name their owner, and removing those whose owner is gone.

A judge makes a temp dir for each worker and for its fork server and removes it when
done; a judge that is killed (kill -9, OOM, a lost terminal) cannot, and its dirs
stayed in the temp dir forever. So each dir's name carries its owner, the judge
process that made it: `krefine-<kind>-<pid>-<start>-XXXXXXXX`, `start` being the
process's start time (clock ticks after boot, /proc/PID/stat), so a reused pid does not
pass for the dead owner. `sweep()` removes such dirs whose owner is no longer running;
the next judge calls it when it starts a fork server.

Never touched: dirs of live owners, dirs of other users, anything not named this way
(dirs of krefine versions before owner names, for which no owner is known).
"""
from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
from pathlib import Path

KINDS = ("worker", "forkserver")
_OWNED = re.compile(r"^krefine-(?:%s)-(\d+)-(\d+)-" % "|".join(KINDS))


def make(kind: str) -> Path:
    """A fresh private temp dir (mkdtemp: mode 0700) for a `kind` of KINDS, named after this process."""
    if kind not in KINDS:
        raise ValueError(f"judge temp dir kind {kind!r}")
    pid = os.getpid()
    return Path(tempfile.mkdtemp(prefix=f"krefine-{kind}-{pid}-{_start_time(pid) or 0}-"))


def sweep(root: str | Path | None = None) -> list[Path]:
    """Remove this user's judge temp dirs under `root` (the temp dir) whose owner has
    exited; the dirs removed."""
    root = Path(root) if root is not None else Path(tempfile.gettempdir())
    removed = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return removed
    for entry in entries:
        m = _OWNED.match(entry.name)
        if m is None:
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
            continue
        if _running(int(m[1]), int(m[2])):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)   # never follows a link out of the dir
        removed.append(Path(entry.path))
    return removed


def _running(pid: int, start: int) -> bool:
    """Is the process that made a dir still there? A zombie is not; a process with the
    same pid but another start time is another process. Where /proc says nothing, the
    pid alone decides (in doubt, the dir stays)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True     # another user's process holds the pid: ours, with that start time, cannot
    stat_line = _stat(pid)
    if stat_line is None:
        return True
    state, now = stat_line
    return state != "Z" and (start == 0 or now == start)


def _start_time(pid: int) -> int | None:
    found = _stat(pid)
    return found[1] if found else None


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, start time in clock ticks after boot) from /proc/PID/stat, or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode(errors="replace")
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()   # the command name may hold spaces and ")"
    try:
        return fields[0], int(fields[19])            # fields 3 and 22 of proc(5)
    except (IndexError, ValueError):
        return None
