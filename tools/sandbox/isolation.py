"""The isolation call: start a worker process for one candidate and talk to it.

One `start_worker` call makes a fresh temp dir (the candidate's cwd, HOME, TMPDIR and
TRITON_CACHE_DIR), a scrubbed environment (env.py), no stdin, captured and capped
output, its own process group (a timeout kills the whole group) and two named pipes for
the framed protocol of tools/sandbox/channel.py. The worker then locks itself down
(rlimits, network namespace, audit hook: tools/sandbox/lockdown.py). Does not judge
anything.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from tools.sandbox import channel, tempdirs
from tools.sandbox.env import worker_env
from tools.errors import EvaluatorError

class WorkerDied(Exception):
    """The worker exited or broke the protocol before answering."""


class WorkerTimeout(Exception):
    """The worker did not answer within the request's timeout (it has been killed)."""


@dataclass
class WorkerProcess:
    proc: subprocess.Popen          # or forkserver.ForkedProcess (same methods used)
    workdir: Path
    cmd_fd: int
    res_fd: int
    max_output_bytes: int
    started_s: float = field(default_factory=time.monotonic)
    killed_for_timeout: bool = False

    def request(self, header: dict, timeout_s: float) -> tuple[dict, bytes]:
        """Send one request and wait for its answer (kill the group on timeout)."""
        try:
            channel.send(self.cmd_fd, header)
            reply, payload = channel.recv(self.res_fd, timeout_s, alive=self.alive)
        except channel.ChannelTimeout:
            self.kill()
            self.killed_for_timeout = True
            raise WorkerTimeout(f"no answer to {header.get('op')} within {timeout_s:g} s") from None
        except (channel.ProtocolError, BrokenPipeError, OSError) as e:
            self.wait_exit(2.0)
            raise WorkerDied(str(e)) from None
        # the most GPU memory its allocator held while serving (its own figure: a
        # diagnostic of where memory goes, never a verdict; tools/judge/memory.py)
        peak = reply.get("gpu_peak_bytes") if isinstance(reply, dict) else None
        if isinstance(peak, int):
            self.gpu_peak_bytes = max(getattr(self, "gpu_peak_bytes", 0), peak)
        return reply, payload

    def alive(self) -> bool:
        return self.proc.poll() is None

    @property
    def shut_down(self) -> bool:
        """Its fork server was closed (the judge shutting down): the server kills its
        children, so a death now is the shutdown's doing, not the candidate's."""
        return bool(getattr(getattr(self.proc, "server", None), "closed", False))

    def wait_exit(self, timeout_s: float) -> int | None:
        try:
            return self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.wait_exit(10.0)

    @property
    def returncode(self) -> int | None:
        return self.proc.poll()

    def output(self) -> dict[str, str]:
        """The worker's stdout/stderr, each cut to max_output_bytes (head and tail)."""
        out = {}
        for name in ("stdout", "stderr"):
            path = self.workdir / f".{name}"
            try:
                size = path.stat().st_size
                with open(path, "rb") as f:
                    if size <= self.max_output_bytes:
                        data = f.read()
                    else:
                        half = self.max_output_bytes // 2
                        head = f.read(half)
                        f.seek(size - half)
                        data = head + f"\n[... {size - 2 * half} bytes cut ...]\n".encode() + f.read()
                out[name] = data.decode("utf-8", "replace")
            except OSError:
                out[name] = ""
        return out

    def close(self, keep_dir: bool = False) -> None:
        if self.alive():
            try:
                self.request({"op": "exit"}, timeout_s=5.0)
                # a wrapper (ncu) writes its report after the worker exits: let it finish
                self.wait_exit(120.0)
            except (WorkerDied, WorkerTimeout):
                pass
            self.kill()
        else:
            self.kill()  # stragglers in the group
        for fd in (self.cmd_fd, self.res_fd):
            try:
                os.close(fd)
            except OSError:
                pass
        if not keep_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)


def start_worker(candidate_src: str, *, device: str, gpu_index: int = 0,
                 max_output_bytes: int = 64 << 10, wrapper: tuple[str, ...] = (),
                 candidate_name: str = "candidate.py", forkserver=None) -> WorkerProcess:
    """Write the candidate into a fresh temp dir and start a worker there: forked from
    `forkserver` (tools/sandbox/forkserver.py, torch already imported) when one is given
    and no wrapper is, else a new interpreter. Either way a fresh process, never reused."""
    workdir = tempdirs.make("worker")
    (workdir / "tmp").mkdir()
    (workdir / "triton-cache").mkdir()
    (workdir / candidate_name).write_text(candidate_src, encoding="utf-8")
    cmd_path, res_path = workdir / ".cmd", workdir / ".res"
    os.mkfifo(cmd_path, 0o600)
    os.mkfifo(res_path, 0o600)
    # the judge keeps its own write end open on the result pipe, so a worker exit shows
    # up as "not alive" in channel.recv rather than as an EOF race
    res_fd = os.open(res_path, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
    env = worker_env(workdir, device, gpu_index)
    if forkserver is not None and not wrapper:
        from tools.sandbox.forkserver import ForkServerError
        try:
            proc = forkserver.fork(workdir=str(workdir), cmd=str(cmd_path), res=str(res_path), env=env)
        except ForkServerError as e:
            os.close(res_fd)
            shutil.rmtree(workdir, ignore_errors=True)
            raise EvaluatorError(f"could not fork a worker: {e}") from None
        cmd_fd = _open_writer(cmd_path, proc, timeout_s=120.0)
        return WorkerProcess(proc=proc, workdir=workdir, cmd_fd=cmd_fd, res_fd=res_fd,
                             max_output_bytes=max_output_bytes)
    stdout = open(workdir / ".stdout", "wb")
    stderr = open(workdir / ".stderr", "wb")
    try:
        proc = subprocess.Popen(
            [*wrapper, sys.executable, "-m", "tools.sandbox.worker", str(cmd_path), str(res_path)],
            cwd=workdir,                              # temp cwd: the candidate's files stay here
            env=env,                                  # scrubbed: no keys, no user paths
            stdin=subprocess.DEVNULL,                 # no stdin
            stdout=stdout, stderr=stderr,             # captured to files, read back capped
            close_fds=True,                           # inherits no descriptor of the judge
            start_new_session=True,                   # own process group: killpg on timeout
        )
    except OSError as e:
        shutil.rmtree(workdir, ignore_errors=True)
        raise EvaluatorError(f"could not start a worker: {e}") from None
    finally:
        stdout.close()
        stderr.close()
    cmd_fd = _open_writer(cmd_path, proc, timeout_s=120.0)
    return WorkerProcess(proc=proc, workdir=workdir, cmd_fd=cmd_fd, res_fd=res_fd,
                         max_output_bytes=max_output_bytes)


def _open_writer(path: Path, proc: subprocess.Popen, timeout_s: float) -> int:
    """Open the command FIFO once the worker has opened its read end (or it died)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            os.set_blocking(fd, True)
            return fd
        except OSError:  # ENXIO: no reader yet
            if proc.poll() is not None or time.monotonic() > deadline:
                return os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)  # requests then fail as WorkerDied
            time.sleep(0.01)


def guess_device() -> str:
    """The device a fork server is started for before torch is imported: cuda where an
    NVIDIA device node exists and CUDA_VISIBLE_DEVICES does not hide every GPU, else cpu
    (torch.cuda.is_available() decides later; a wrong guess costs the early server)."""
    hidden = os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1")
    return "cuda" if os.path.exists("/dev/nvidiactl") and not hidden else "cpu"


def device_fault(device: str, gpu_index: int) -> str | None:
    """Why a judge cannot use `device` ("cuda" or "cpu") and GPU `gpu_index` here, as one
    line naming the flag, or None. torch decides about CUDA (imported only for cuda)."""
    if gpu_index < 0:
        return f"--gpu must not be negative, got {gpu_index}"
    if device != "cuda":
        return None if gpu_index == 0 else \
            f"--gpu {gpu_index}: judging on {device} uses no GPU (leave --gpu out, or use --device cuda)"
    import torch
    if not torch.cuda.is_available():
        return "--device cuda but no CUDA device is visible (use --device cpu)"
    count = torch.cuda.device_count()
    if gpu_index >= count:
        return f"--gpu {gpu_index}: no such GPU ({count} visible, numbered from 0)"
    return None


def start_forkserver(device: str, gpu_index: int = 0):
    """A fork server for workers of `device` ("cuda", "cpu" or "compile"), started with
    the worker environment (scrubbed, its own temp dir); None where fork servers cannot
    work here (no pidfd), so callers spawn each worker instead. Every judge starts one:
    it first removes the temp dirs that killed judges left (tools/sandbox/tempdirs.py).
    Inside `spare_forkservers()`, the server comes from the spare started when the last
    one was taken (it has imported torch meanwhile), and a new spare starts at once."""
    key = (device, gpu_index)
    with _spares_lock:
        spare = _spares.pop(key, None) if _spares is not None else None
    if spare is not None and not spare.alive():
        spare.close()
        spare = None
    server = spare if spare is not None else _new_forkserver(device, gpu_index)
    with _spares_lock:
        keep = _spares is not None and key not in _spares
    if keep:
        _start_spare(key)   # it imports while `server` is used
    return server


# spare fork servers, one per (kind, GPU) at most: None unless spare_forkservers() is on
_spares: dict[tuple[str, int], object] | None = None
_spares_lock = threading.Lock()


@contextlib.contextmanager
def spare_forkservers():
    """For a process that judges one problem after another (a bench's GPU worker): each
    judge's fork server was started while the previous problem was judged, so no judge
    waits for its server's imports (torch, triton: seconds). A spare is what the next
    judge would have started itself, a fresh server that has only imported its modules;
    it is used by one judge and closed with it, as before. Spares left are closed here."""
    global _spares
    with _spares_lock:
        outer, _spares = _spares, (_spares if _spares is not None else {})
    try:
        yield
    finally:
        if outer is None:
            with _spares_lock:
                left, _spares = list((_spares or {}).values()), None
            for fs in left:
                fs.close()


def prestart_forkservers(device: str, gpu_index: int = 0) -> None:
    """Inside spare_forkservers(): start now the servers the first judge on `device`
    ("cuda" or "cpu") and GPU `gpu_index` will take, one for its workers and one for its
    compiles, so it finds them started as the later judges do (a bench's GPU worker, before
    its first problem: they import in their own processes while it imports). A no-op
    outside the context, or for a kind that has its spare already."""
    for kind in (device, "compile"):
        key = (kind, gpu_index)
        with _spares_lock:
            if _spares is None or key in _spares:
                continue
        _start_spare(key)


def _start_spare(key: tuple[str, int]) -> None:
    """A new server for `key` kept as its spare, unless one was kept meanwhile."""
    fresh = _new_forkserver(*key)
    with _spares_lock:
        if _spares is not None and key not in _spares and fresh is not None:
            _spares[key], fresh = fresh, None
    if fresh is not None:
        fresh.close()


def _new_forkserver(device: str, gpu_index: int):
    from tools.sandbox.forkserver import ForkServer, ForkServerError
    tempdirs.sweep()
    home = tempdirs.make("forkserver")
    (home / "tmp").mkdir()
    (home / "triton-cache").mkdir()
    try:
        return ForkServer(device, worker_env(home, device, gpu_index), log_path=str(home / ".stderr"))
    except ForkServerError:
        shutil.rmtree(home, ignore_errors=True)
        return None
