"""The client side of the judge service (tools/judge/service.py): find it, start it, ask it.

A service is keyed by the device, the GPU and everything that changes what it would
judge with: this Python, the tools/ sources, torch's and triton's versions and the
environment variables that steer them. Its socket lives in a directory only this user
may enter ($XDG_RUNTIME_DIR or the temp dir, `krefine-<uid>`; KREFINE_JUDGE_DIR
overrides). One service per GPU: a client whose key differs asks the old one to stop
once it is idle. Imports no torch: a client with a warm service costs a python start.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tools.errors import BadInput, EvaluatorError

TOOLS = Path(__file__).resolve().parents[1]
_ENV_PREFIXES = ("CUDA_", "TRITON_", "TORCH", "PYTORCH_", "NVIDIA_", "KREFINE_JUDGE_KEY")
_ENV_KEYS = ("PATH", "LD_LIBRARY_PATH", "PYTHONPATH")
START_TIMEOUT_S = 300.0
MAX_DIR_BYTES = 107 - len("/judge-cuda15-0123456789abcdef.sock")   # the longest socket name in it


def service_dir() -> Path:
    """The user's private directory for service sockets (made 0700, checked to be ours)."""
    chosen = os.environ.get("KREFINE_JUDGE_DIR")   # the user's: its faults are bad input
    base = chosen or os.path.join(os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir(), f"krefine-{os.getuid()}")
    too_long = len(os.fsencode(base)) > MAX_DIR_BYTES   # a socket's path ends at 107 bytes (AF_UNIX)
    if too_long and not chosen:
        base, too_long = f"/tmp/krefine-{os.getuid()}", False   # a long TMPDIR's own would not do
    if too_long and not os.path.isdir(base):   # said before anything is made
        raise BadInput(chosen, f"KREFINE_JUDGE_DIR is too long for the judge service's sockets (at most "
                               f"{MAX_DIR_BYTES} bytes: AF_UNIX paths end at 107); name a shorter directory")
    path = Path(base)
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.lstat(path)
    except OSError as e:
        if chosen:
            raise BadInput(path, f"KREFINE_JUDGE_DIR: {e.strerror or e}") from None
        raise EvaluatorError(f"judge service directory {path}: {e.strerror or e}") from None
    if chosen and not stat.S_ISDIR(st.st_mode):
        raise BadInput(path, "KREFINE_JUDGE_DIR names something that is not a directory")
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise EvaluatorError(f"judge service directory {path} is not a private directory of this "
                             "user (mode 0700); remove it or set KREFINE_JUDGE_DIR")
    if too_long:
        raise BadInput(chosen, f"KREFINE_JUDGE_DIR is too long for the judge service's sockets (at most "
                               f"{MAX_DIR_BYTES} bytes: AF_UNIX paths end at 107); name a shorter directory")
    return path


def service_key() -> str:
    """What a service's judging depends on besides its requests (see the module doc)."""
    h = hashlib.sha256()
    h.update(f"{sys.executable}\n{sys.version}\n".encode())
    for name in ("torch", "triton"):
        h.update(f"{name}={_version(name)}\n".encode())
    for k in sorted(os.environ):
        if k in _ENV_KEYS or k.startswith(_ENV_PREFIXES):
            h.update(f"{k}={os.environ[k]}\n".encode())
    for path in sorted(TOOLS.rglob("*.py")):
        h.update(str(path.relative_to(TOOLS)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def _version(dist: str) -> str:
    from importlib import metadata
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "-"


def socket_path(device: str, gpu_index: int, key: str | None = None) -> Path:
    return service_dir() / f"judge-{device}{gpu_index}-{key or service_key()}.sock"


def connect(path: Path, timeout_s: float = 2.0) -> socket.socket | None:
    """A connection to the service at `path`, or None where none listens."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout_s)
    try:
        s.connect(str(path))
    except OSError:
        s.close()
        return None
    s.settimeout(None)
    return s


def ask(sock: socket.socket, request: dict, on_message=None) -> dict:
    """Send one request; hand every reply line to `on_message`; return the last one.
    A connection that ends without a final line is an EvaluatorError."""
    with sock:
        sock.sendall(json.dumps(request).encode() + b"\n")
        buf = b""
        last = None
        while True:
            chunk = sock.recv(1 << 20)
            if not chunk:
                break
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                last = json.loads(line)
                if on_message is not None:
                    on_message(last)
                if "done" in last or "error" in last or "ok" in last:
                    return last
    raise EvaluatorError("the judge service closed the connection without an answer "
                         "(it died; see `krefine judge status` and its log)")


def ensure(device: str, gpu_index: int, idle_s: float, say=None,
           service_device: str | None = None) -> tuple[socket.socket, int | None]:
    """A connection to this key's service for `device` (the socket's name), started when
    none answers, with `service_device` ("auto": cuda if torch finds one); (it, the
    pid of the service started here, or None when one was running)."""
    key = service_key()
    path = socket_path(device, gpu_index, key)
    sock = connect(path)
    if sock is not None:
        return sock, None
    lock_path = path.with_suffix(".lock")
    with _flock(lock_path):
        sock = connect(path)   # another client started it while we waited for the lock
        if sock is not None:
            return sock, None
        _stop_others(device, gpu_index, path)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()      # a dead service's socket
        if say:
            say(f"starting the judge service for {device}:{gpu_index}")
        proc = _spawn(path, service_device or device, gpu_index, idle_s)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            sock = connect(path)
            if sock is not None:
                return sock, proc.pid
            if proc.poll() is not None:
                break
            time.sleep(0.02)
        proc.kill()
        raise EvaluatorError(f"the judge service did not start: {_log_tail(path)}")


def _spawn(path: Path, device: str, gpu_index: int, idle_s: float) -> subprocess.Popen:
    log = open(path.with_suffix(".log"), "wb")
    env = dict(os.environ)
    # this checkout first, as the client sees it (the service imports tools from it)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(TOOLS.parent), env.get("PYTHONPATH"))))
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "tools.judge.service", "--socket", str(path), "--device", device,
             "--gpu", str(gpu_index), "--idle", str(idle_s)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, cwd="/",
            start_new_session=True,   # outlives this process and its terminal's Ctrl-C
            close_fds=True)
    except OSError as e:
        raise EvaluatorError(f"could not start the judge service: {e}") from None
    finally:
        log.close()


def _log_tail(path: Path) -> str:
    try:
        text = path.with_suffix(".log").read_text(errors="replace").strip().splitlines()
    except OSError:
        return "no log"
    return " | ".join(text[-3:])[-400:] or "no output"


@contextlib.contextmanager
def _flock(path: Path):
    import fcntl
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def services() -> list[Path]:
    """Every service socket in this user's directory."""
    return sorted(service_dir().glob("judge-*.sock"))


def _stop_others(device: str, gpu_index: int, keep: Path) -> None:
    """One service per GPU: older keys on this device and GPU stop once idle."""
    for path in services():
        if path != keep and path.name.startswith(f"judge-{device}{gpu_index}-"):
            stop(path)


def ping(path: Path) -> dict | None:
    sock = connect(path)
    if sock is None:
        return None
    try:
        return ask(sock, {"op": "ping"})
    except (EvaluatorError, OSError, ValueError):
        return None


def stop(path: Path) -> bool:
    """Ask the service at `path` to exit (once idle); remove a dead one's files."""
    sock = connect(path)
    if sock is None:
        for p in (path, path.with_suffix(".lock"), path.with_suffix(".log")):
            with contextlib.suppress(OSError):
                p.unlink()
        return False
    with contextlib.suppress(EvaluatorError, OSError, ValueError):
        ask(sock, {"op": "stop"})
    return True


def judge_via_service(problem: str, candidates: list[tuple[str, str]], *, device: str, gpu_index: int,
             settings: dict, profile: bool, idle_s: float, say=None, on_verdict=None,
             on_start=None, service_device: str | None = None) -> list[dict]:
    """Verdict documents for `candidates` ([(name, src)]) from the service, started when
    needed; `say(text)` hears its progress, `on_verdict(i, doc)` each verdict as it comes,
    `on_start(pid)` once the service this call started has answered and stays running.
    The service's bad-input answers raise BadInput, its failures EvaluatorError."""
    docs: dict[int, dict] = {}
    heard_any = [False]

    def heard(msg: dict) -> None:
        heard_any[0] = True
        if "progress" in msg and say:
            say(msg["progress"])
        elif "verdict" in msg:
            doc = msg["doc"]
            doc.setdefault("checks", {}).setdefault("judge_service", {})["started_now"] = started is not None
            docs[int(msg["verdict"])] = doc
            if on_verdict is not None:
                on_verdict(int(msg["verdict"]), doc)
    request = {"op": "eval", "problem": os.path.abspath(problem), "candidates": candidates,
               "settings": settings, "profile": profile, "progress": say is not None, "keep_s": idle_s}
    for attempt in (1, 2):
        sock, started = ensure(device, gpu_index, idle_s, say, service_device)
        try:
            last = ask(sock, request, heard)
            break
        except (EvaluatorError, OSError):
            # a service that went away between our connect and its accept (it had just
            # timed out idle) answered nothing: ask a fresh one, once
            if heard_any[0] or attempt == 2:
                raise
    if started is not None and on_start is not None and not last.get("exiting"):
        on_start(started)   # a service that refused its device has exited: nothing to announce
    if last.get("error") == "bad_input":
        raise BadInput("", last.get("message", "bad input"))
    if "error" in last:
        raise EvaluatorError(f"judge service: {last.get('message', last['error'])}")
    return [docs[i] for i in range(len(candidates))]
