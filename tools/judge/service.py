"""The judge service: one process per (device, GPU) that outlives a `krefine eval`.

A standalone `krefine eval` would otherwise pay, every time, what a judge session pays
once: python and `import torch` twice (here and in the fork server), the CUDA context,
the reference, the torch.compile baseline (BENCHMARKS.md, "Standalone krefine eval").
The first `krefine eval` on a GPU starts this service (tools/judge/client.py); its
session cache (tools/judge/pool.py) keeps the fork server and, per problem, the
Judge session for later invocations, and it exits after `idle_s` seconds with no
request (`[eval] keep_judge_s`).
Each candidate still gets a fresh worker; isolation and verdicts are the Judge's, as in
a session of `krefine run`.

Requests run in threads of their own, so several clients' candidates (of up to
MAX_SESSIONS problems) are judged at once in this one process: the GPU lock
(tools/judge/gpulock.py) gives trials and timing to one candidate at a time, and the
capture guard (tools/perf/capture_guard.py) keeps every other piece of this process's
GPU work (a new session's device check, a torch.compile baseline, memory released, a
staging buffer freed) away from a baseline's CUDA-graph capture, which it would break
and by which it would be refused.

Protocol: a Unix stream socket in a directory only its user may enter (client.py makes
it), one JSON request line per connection, JSON reply lines:

  {"op": "ping"}  -> {"ok": true, "pid", "protocol", "device", "gpu", "sessions", ...}
  {"op": "stop"}  -> {"ok": true}; exits once no request is in flight
  {"op": "eval", "problem": ABS_PATH, "candidates": [[name, src], ...],
   "settings": {"eval": {...}, "timing": {...}, "guards": {...}}, "profile": bool,
   "progress": bool, "keep_s": float}
       -> {"progress": text}* , {"verdict": i, "doc": verdict json}* , {"done": true}
          or {"error": "bad_input" | "evaluator" | "internal", "message": text}

A service whose device cannot judge (no GPU, no such GPU) answers every request with
{"error": "bad_input", "message": text, "exiting": true} and exits within a second.

No op exposes the session's secret seeds or reference outputs. Does not decide
verdicts; loads problems with tools/problem.py exactly as the in-process CLI does.
"""
from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import sys
import threading
import time

PROTOCOL = 1
MAX_REQUEST = 64 << 20      # one request line: candidate sources and settings
MAX_SESSIONS = 2            # problems kept warm at once (each holds a reference and baselines)


class Service:
    """The socket's side of the session cache (tools/judge/pool.py): requests in,
    verdicts out; the cache keeps the sessions (MAX_SESSIONS of them) and the fork
    servers they share."""

    def __init__(self, device: str, gpu_index: int, idle_s: float, forkservers: dict):
        from tools.judge.pool import SessionCache
        self.device, self.gpu_index, self.idle_s = device, gpu_index, idle_s
        self.started = time.time()
        self.cache = SessionCache(keep=MAX_SESSIONS, forkservers=forkservers)
        self.lock = threading.Lock()
        self.active = 0
        self.last = time.monotonic()
        self.stopping = False
        self.served = 0

    # --- sessions ----------------------------------------------------------------
    def session(self, path: str, settings):
        """The warm session for (problem file content, settings), made on first use;
        (it, whether it existed). The caller releases it (`release`)."""
        from tools.errors import BadInput
        from tools.judge.pool import SessionKey, problem_id
        try:
            data = open(path, "rb").read()
        except OSError as e:
            raise BadInput(path, f"cannot read the problem: {e.strerror or e}") from None
        key = SessionKey(problem_id(path, data), settings, self.device, self.gpu_index)
        return self.cache.acquire(key, lambda: self._load(path), label=path)

    def _load(self, path: str):
        from tools.errors import BadInput
        from tools.problem import load_problem
        if self.device == "cuda":
            import torch
            if not torch.cuda.is_available():
                raise BadInput("", "--device cuda but no CUDA device is visible (use --device cpu)")
        return load_problem(path)

    def release(self, session) -> None:
        self.cache.release(session)

    # --- requests ----------------------------------------------------------------
    def handle(self, conn: socket.socket) -> None:
        with self.lock:
            self.active += 1
        try:
            with conn:
                req = _read_request(conn)
                if req is None:
                    _send(conn, {"error": "bad_request", "message": "expected one JSON request line"})
                    return
                op = req.get("op")
                if op == "ping":
                    _send(conn, self.describe())
                elif op == "stop":
                    self.stopping = True
                    _send(conn, {"ok": True})
                elif op == "eval":
                    self.serve_eval(conn, req)
                else:
                    _send(conn, {"error": "bad_request", "message": f"unknown op {op!r}"})
        except Exception as e:  # noqa: BLE001 - the service outlives one bad connection
            print(f"krefine judge service: request failed: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        finally:
            with self.lock:
                self.active -= 1
                self.last = time.monotonic()

    def describe(self) -> dict:
        from tools.perf.capture_guard import GUARD
        sessions = [{"problem": s.label, "busy": s.users, "judged": s.judge.judged if s.judge else 0}
                    for s in self.cache.sessions()]
        return {"ok": True, "pid": os.getpid(), "protocol": PROTOCOL, "device": self.device,
                "gpu": self.gpu_index, "started": self.started, "idle_s": self.idle_s,
                "served": self.served, "active": self.active - 1, "sessions": sessions,
                "capture_guard": GUARD.stats()}   # what requests' captures waited for others' GPU work

    def serve_eval(self, conn: socket.socket, req: dict) -> None:
        from tools.errors import BadInput, EvaluatorError
        from tools.settings import SettingsError, eval_settings_from_toml
        out = _Sender(conn)
        say = (lambda text: out.send({"progress": text})) if req.get("progress") else None
        if req.get("keep_s") is not None:
            self.idle_s = float(req["keep_s"])   # the newest client's wish
        try:
            settings = eval_settings_from_toml(req.get("settings") or {}, "request")
            cands = [(str(n), str(s)) for n, s in req["candidates"]]
            entry, reused = self.session(str(req["problem"]), settings)
        except (BadInput, SettingsError) as e:
            _send(conn, {"error": "bad_input", "message": str(e)})
            return
        except EvaluatorError as e:
            _send(conn, {"error": "evaluator", "message": str(e)})
            return
        except (KeyError, TypeError, ValueError) as e:
            _send(conn, {"error": "bad_request", "message": f"{type(e).__name__}: {e}"})
            return
        judge = entry.judge
        service = {"pid": os.getpid(), "reused_session": reused,
                   "age_s": round(time.time() - self.started, 1), "served_before": self.served}

        def heard(i: int, verdict) -> None:
            doc = verdict.to_json()
            doc["checks"] = {**doc.get("checks", {}), "judge_service": service}
            out.send({"verdict": i, "doc": doc})
        try:
            if say and not reused:
                say(f"judge service: a new session for {os.path.basename(req['problem'])} "
                    "(reference, baselines; later evals reuse it)")
            judge.judge_many(cands, profile=bool(req.get("profile")), progress=say, on_verdict=heard)
            self.served += len(cands)
            out.send({"done": True})
        except BadInput as e:
            out.send({"error": "bad_input", "message": str(e)})
        except Exception as e:  # noqa: BLE001 - the evaluator's failure or our bug: exit 3 there
            self.cache.drop(entry)
            kind = "evaluator" if isinstance(e, EvaluatorError) else "internal"
            out.send({"error": kind, "message": str(e) if kind == "evaluator" else f"{type(e).__name__}: {e}"})
        finally:
            self.release(entry)
            if self.device == "cuda":   # an idle service holds its sessions' tensors, not a cache
                from tools.judge.memory import release
                release(f"cuda:{self.gpu_index}")

    def idle(self) -> bool:
        with self.lock:
            return self.active == 0 and time.monotonic() - self.last > self.idle_s

    def close(self) -> None:
        self.cache.close()


def _read_request(conn: socket.socket) -> dict | None:
    buf = bytearray()
    while b"\n" not in buf:
        chunk = conn.recv(1 << 20)
        if not chunk:
            break
        buf += chunk
        if len(buf) > MAX_REQUEST:
            return None
    try:
        req = json.loads(bytes(buf).split(b"\n", 1)[0])
    except ValueError:
        return None
    return req if isinstance(req, dict) else None


def _send(conn: socket.socket, msg: dict) -> None:
    conn.sendall(json.dumps(msg, default=str).encode() + b"\n")


class _Sender:
    """Reply lines to one client; once it has gone (Ctrl-C), the rest is dropped and the
    judging finishes, so the session stays consistent for the next client."""

    def __init__(self, conn: socket.socket):
        self.conn, self.gone, self.lock = conn, False, threading.Lock()

    def send(self, msg: dict) -> None:
        with self.lock:
            if self.gone:
                return
            try:
                _send(self.conn, msg)
            except OSError:
                self.gone = True


def serve(path: str, device: str, gpu_index: int, idle_s: float) -> int:
    """Listen on `path` first (clients queue while torch imports), start the fork server
    before importing torch, then answer requests until idle or stopped."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(path)
    except OSError as e:
        print(f"krefine judge service: {path}: {e}" + (" (another service has it)" if e.errno == errno.EADDRINUSE
                                                         else ""), file=sys.stderr)
        return 0
    os.chmod(path, 0o600)
    sock.listen(64)
    me = os.stat(path).st_ino
    from tools.sandbox.isolation import device_fault, guess_device, start_forkserver
    guess = device if device != "auto" else guess_device()
    early = start_forkserver(guess, gpu_index)
    from tools.judge.reference import default_device
    resolved = device if device != "auto" else default_device()
    why = device_fault(resolved, gpu_index)
    if why is not None:   # no GPU, or no such GPU: tell who is waiting, then leave nothing running
        if early is not None:
            early.close()
        print(f"krefine judge service: {why}", file=sys.stderr, flush=True)
        _refuse(sock, path, me, why)
        return 0
    forkservers = {}
    if early is not None and resolved == guess:
        forkservers[resolved] = early
    elif early is not None:
        early.close()
    # every request runs in a thread of its own: torch's lazy modules now, before two
    # first uses at once can race for them (tools/judge/warm.py); clients queue meanwhile
    from tools.judge.warm import WARMED, warm_imports
    warm_s = warm_imports(resolved)
    missing = ", ".join(f"{name} ({why})" for name, why in WARMED.items() if why != "ok")
    svc = Service(resolved, gpu_index, idle_s, forkservers)
    print(f"krefine judge service: pid {os.getpid()} on {resolved}:{gpu_index}, {path}; torch's lazy modules "
          f"imported in {warm_s:.1f} s" + (f", not: {missing}" if missing else ""), file=sys.stderr, flush=True)
    def accept(timeout_s: float) -> bool:
        sock.settimeout(timeout_s)
        try:
            conn, _ = sock.accept()
        except TimeoutError:
            return False
        conn.settimeout(None)
        threading.Thread(target=svc.handle, args=(conn,), daemon=True, name="krefine-service").start()
        return True
    try:
        while not (svc.stopping and svc.active == 0) and not svc.idle():
            accept(0.5)
    finally:
        _unlink_ours(path, me)        # no new client finds us now ...
        while accept(0.05):          # ... and one that connected meanwhile is still served
            pass
        while svc.active:
            time.sleep(0.05)
        sock.close()
        svc.close()
    return 0


def _unlink_ours(path: str, me: int) -> None:
    """Remove the socket, its lock and its log, unless a newer service has replaced them."""
    try:
        if os.stat(path).st_ino == me:
            os.unlink(path)
            for extra in (".lock", ".log"):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.splitext(path)[0] + extra)
    except OSError:
        pass


def _refuse(sock: socket.socket, path: str, me: int, why: str) -> None:
    """A service that cannot judge on its device answers every request with `why` (the
    client that started it is already connected and waiting: it gets exit 2, not a
    vanished service), says it is exiting, and goes."""
    refusal = {"error": "bad_input", "message": why, "exiting": True}
    sock.settimeout(0.5)   # the starting client connected while torch was imported
    quiet_until = time.monotonic() + 0.5
    unlinked = False
    while True:
        try:
            conn, _ = sock.accept()
        except TimeoutError:
            if unlinked:
                break
            if time.monotonic() >= quiet_until:
                _unlink_ours(path, me)   # no new client finds us; drain those already queued
                unlinked = True
                sock.settimeout(0.05)
            continue
        with conn:
            conn.settimeout(5.0)
            with contextlib.suppress(OSError):
                _read_request(conn)
                _send(conn, refusal)
    sock.close()


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser(prog="python -m tools.judge.service")
    ap.add_argument("--socket", required=True)
    ap.add_argument("--device", default="auto", choices=("auto", "cuda", "cpu"))
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--idle", type=float, default=300.0)
    a = ap.parse_args()
    code = serve(a.socket, a.device, a.gpu, a.idle)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)   # no interpreter teardown of torch and CUDA: nothing is left to flush
