"""A fork server: one process with torch and triton imported (and no CUDA context) that
forks a fresh worker for each candidate, so a worker starts in milliseconds instead of
paying Python + `import torch` (seconds: BENCHMARKS.md, "Evaluator throughput beside
KernelBench").

The judge starts it with the same isolation call as any worker
(tools/sandbox/isolation.py: scrubbed environment, no stdin, own session) and talks to
it over a Unix socket pair:

  fork  {workdir, cmd, res, env}  -> the child's pid, and a pidfd for it (SCM_RIGHTS)
  wait  {pid, timeout_s}          -> the child's exit status once it has exited

Each child is a new worker, never reused: it starts its own session (so the judge can
kill its whole group), points stdin at /dev/null and stdout/stderr at files in its own
temp dir, closes every other descriptor it inherited (the judge's socket among them),
takes the worker environment the judge chose, and runs tools/sandbox/worker.py's
request loop, which locks it down before any candidate code runs. Nothing a child does reaches the
server: they share only what fork copied.

The server never initialises CUDA (a forked child of a process that did cannot use
it), never runs candidate code, and exits, killing its children, when the judge's end
of the socket closes. Does not decide anything about candidates.

Not covered: workers under a wrapper (ncu) are started by tools/sandbox/isolation.py
directly.
"""
from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time

MODES = ("cuda", "cpu", "compile")   # cpu: Triton's interpreter, set before triton is imported
_MAX_MSG = 1 << 16


class ForkServerError(RuntimeError):
    """The fork server could not start or stopped answering (the caller spawns instead)."""


# --------------------------------------------------------------------- judge side

class ForkServer:
    """The judge's handle on one running fork server (thread-safe)."""

    def __init__(self, mode: str, env: dict[str, str], log_path: str, start_timeout_s: float = 120.0):
        if mode not in MODES:
            raise ValueError(f"fork server mode {mode!r}")
        if not hasattr(os, "pidfd_open"):
            raise ForkServerError("os.pidfd_open is not available on this system")
        self.mode = mode
        self._lock = threading.Lock()
        self.closed = False             # close() was called: its children are being killed
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._sock = ours
        self._log_path = log_path
        log = open(log_path, "wb")
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tools.sandbox.forkserver", str(theirs.fileno()), mode],
                env=env,                      # scrubbed by the caller (sandbox.worker_env)
                stdin=subprocess.DEVNULL,     # no stdin
                stdout=subprocess.DEVNULL,    # children redirect their own output to files
                stderr=log,                   # start-up failures only (read back on error)
                pass_fds=(theirs.fileno(),),  # the socket, and nothing else of the judge's
                start_new_session=True,       # never in the terminal's process group
            )
        except OSError as e:
            raise ForkServerError(f"could not start the fork server: {e}") from None
        finally:
            theirs.close()
            log.close()
        self._ready = None
        self._start_timeout_s = start_timeout_s
        self._started = time.monotonic()
        self.ready_after_s: float | None = None   # start -> ready (its imports), once known

    def wait_ready(self) -> None:
        """Block until the server has imported torch and triton (first use only)."""
        if self._ready is not None:
            if self._ready is not True:
                raise ForkServerError(self._ready)
            return
        with self._lock:
            if self._ready is None:
                try:
                    reply, _ = self._recv(self._start_timeout_s)
                    self._ready = True if reply.get("ready") else f"fork server not ready: {reply}"
                    self.ready_after_s = round(time.monotonic() - self._started, 3)
                except ForkServerError as e:
                    self._ready = str(e)
        if self._ready is not True:
            raise ForkServerError(self._ready)

    def fork(self, *, workdir: str, cmd: str, res: str, env: dict[str, str]) -> "ForkedProcess":
        self.wait_ready()
        with self._lock:
            self._send({"op": "fork", "workdir": workdir, "cmd": cmd, "res": res, "env": env})
            reply, fds = self._recv(30.0)
        if not reply.get("ok") or not fds:
            for fd in fds:
                os.close(fd)
            raise ForkServerError(f"fork failed: {reply.get('message', reply)}")
        return ForkedProcess(self, int(reply["pid"]), fds[0])

    def wait_status(self, pid: int, timeout_s: float) -> int | None:
        with self._lock:
            self._send({"op": "wait", "pid": pid, "timeout_s": timeout_s})
            reply, _ = self._recv(timeout_s + 30.0)
        return reply.get("status")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        self.closed = True
        try:
            self._sock.close()          # the server kills its children and exits on EOF
        except OSError:
            pass
        if self._ready is not True and self.proc.poll() is None:
            # never used (e.g. krefine eval's early server after a static reject): it may
            # still be importing torch and would see the EOF only afterwards
            self._kill()
        try:
            self.proc.wait(10.0)
        except subprocess.TimeoutExpired:
            self._kill()
            self.proc.wait(10.0)
        import shutil
        shutil.rmtree(os.path.dirname(self._log_path), ignore_errors=True)

    def _kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass

    def _send(self, msg: dict) -> None:
        try:
            self._sock.sendall(json.dumps(msg).encode())
        except OSError as e:
            raise ForkServerError(f"fork server gone: {e}") from None

    def _recv(self, timeout_s: float) -> tuple[dict, list[int]]:
        ready, _, _ = select.select([self._sock], [], [], timeout_s)
        if not ready:
            raise ForkServerError(f"fork server did not answer within {timeout_s:g} s")
        try:
            data, fds, _, _ = socket.recv_fds(self._sock, _MAX_MSG, 1)
        except OSError as e:
            raise ForkServerError(f"fork server gone: {e}") from None
        if not data:
            try:
                with open(self._log_path, "rb") as f:
                    err = f.read()[-600:].decode(errors="replace").strip()
            except OSError:
                err = ""
            raise ForkServerError("fork server exited" + (f": {err}" if err else ""))
        return json.loads(data), list(fds)


class ForkedProcess:
    """A forked worker, with the subset of subprocess.Popen that isolation.py uses."""

    def __init__(self, server: ForkServer, pid: int, pidfd: int):
        self.server, self.pid, self._pidfd = server, pid, pidfd
        self._status: int | None = None

    def poll(self) -> int | None:
        if self._status is None and self._exited(0.0):
            self._reap()
        return self._status

    def wait(self, timeout: float | None = None) -> int:
        if self._status is None:
            if not self._exited(timeout):
                raise subprocess.TimeoutExpired("worker", timeout)
            self._reap()
        return self._status

    def _exited(self, timeout: float | None) -> bool:
        # a pidfd turns readable when the process exits, whoever its parent is
        return bool(select.select([self._pidfd], [], [], timeout)[0])

    def _reap(self) -> None:
        try:
            status = self.server.wait_status(self.pid, 10.0)
        except ForkServerError:
            status = None
        self._status = status if status is not None else -signal.SIGKILL
        try:
            os.close(self._pidfd)
        except OSError:
            pass


# --------------------------------------------------------------------- server side

def _child(req: dict) -> None:
    """In the forked child: become a fresh, separate worker process. Never returns."""
    code = 1
    try:
        os.setsid()                                   # own process group: killpg on timeout
        workdir = req["workdir"]
        null = os.open(os.devnull, os.O_RDONLY)
        out = os.open(os.path.join(workdir, ".stdout"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        err = os.open(os.path.join(workdir, ".stderr"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        for src, dst in ((null, 0), (out, 1), (err, 2)):
            os.dup2(src, dst)
        os.closerange(3, _max_fd())                   # the judge's socket, the server's pipes
        os.chdir(workdir)                             # temp cwd: the candidate's files stay here
        os.environ.clear()
        os.environ.update(req["env"])                 # the worker environment the judge chose
        import tempfile
        tempfile.tempdir = None                       # re-read TMPDIR: the server's may be cached
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        from tools.sandbox.worker import run_worker
        run_worker(req["cmd"], req["res"])
        code = 0
    except BaseException:  # noqa: BLE001 - report on the child's own stderr, then exit
        import traceback
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _max_fd() -> int:
    try:
        return os.sysconf("SC_OPEN_MAX")
    except (ValueError, OSError):
        return 65536


def serve(sock_fd: int, mode: str) -> None:
    sock = socket.socket(fileno=sock_fd)
    # 1) what every worker imports anyway, once: torch, triton, the worker's own modules
    import torch  # noqa: F401
    import triton  # noqa: F401
    import triton.language  # noqa: F401
    from tools import problem  # noqa: F401
    from tools.sandbox import channel, cudaipc, worker  # noqa: F401
    from tools.perf import profiler, timer  # noqa: F401
    _warm_lazy_imports()
    children: set[int] = set()
    sock.sendall(json.dumps({"ready": True, "pid": os.getpid(), "mode": mode}).encode())
    # 2) one request at a time until the judge closes its end
    try:
        while True:
            data = sock.recv(_MAX_MSG)
            if not data:
                return
            req = json.loads(data)
            if req.get("op") == "fork":
                pid = os.fork()
                if pid == 0:
                    _child(req)
                children.add(pid)
                pidfd = os.pidfd_open(pid)
                socket.send_fds(sock, [json.dumps({"ok": True, "pid": pid}).encode()], [pidfd])
                os.close(pidfd)
            elif req.get("op") == "wait":
                pid = int(req["pid"])
                status = _wait(pid, float(req.get("timeout_s", 10.0))) if pid in children else None
                if status is not None:
                    children.discard(pid)
                sock.sendall(json.dumps({"ok": True, "status": status}).encode())
            else:
                sock.sendall(json.dumps({"ok": False, "message": f"unknown op {req.get('op')!r}"}).encode())
    finally:
        kill_children(children)   # the judge is gone: so are its workers


def kill_children(children: set[int]) -> None:
    """SIGKILL each child's process group, and the child itself: one forked an instant
    before the judge died may not have called setsid yet, so its group does not exist
    (killpg alone left such a worker blocked on its command FIFO forever). The pids are
    our unreaped children, so they cannot have been reused."""
    for pid in children:
        for kill in (os.killpg, os.kill):
            try:
                kill(pid, signal.SIGKILL)
            except OSError:
                pass


def _warm_lazy_imports() -> None:
    """What each worker's first trial would otherwise import lazily, on CPU tensors only
    (no CUDA here): the first TorchDispatchMode use (the aten-op counter of every
    trial) pulls in torch's subclass machinery: paid here once, not by every worker."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Noop(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))
    with _Noop():
        (torch.ones(2) + 1).sum()


def _wait(pid: int, timeout_s: float) -> int | None:
    """Exit status as subprocess reports it (negative: killed by that signal)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            got, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return None
        if got == pid:
            return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        if time.monotonic() > deadline:
            return None
        time.sleep(0.01)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # the judge decides when we stop
    serve(int(sys.argv[1]), sys.argv[2])
    os._exit(0)   # children are killed; skipping torch's interpreter teardown spares close() the wait
