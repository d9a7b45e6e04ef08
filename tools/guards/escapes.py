"""The guards on work escaping the timer or the sandbox: threads, processes, network,
side streams, foreign kernel toolkits, files.

Each rejects what its table names (an import, a call, a reference) with one sentence
saying why; `check_filesystem` also reads open() modes and path literals (relative
paths inside the temp dir may be read), and refuses any string naming the kernel's
pseudo-files (/proc, /sys, /dev but /dev/null: the process's memory and descriptors),
whatever reads it. What a candidate does at run time regardless is the worker's audit
hook's to refuse (tools/sandbox/lockdown.py) or to report (tools/sandbox/detours.py).
"""
from __future__ import annotations

import ast
import re

from tools.guards.names import resolve, words
from tools.guards.regions import DEAD
from tools.guards.source import Finding, Source, line_of, path_hits, spell, under
from tools.settings import GuardSettings

CONCURRENCY = ("threading", "_thread", "multiprocessing", "concurrent", "asyncio", "subprocess",
               "torch.multiprocessing", "pty", "sched", "os.system", "os.popen", "os.fork", "os.forkpty",
               "os.spawn*", "os.exec*", "os.posix_spawn*", "os.kill", "os.killpg", "os.register_at_fork",
               "os.setsid", "os.setpgid", "os.setpgrp", "torch.jit.fork", "torch.jit._fork", "torch.futures",
               "_posixsubprocess", "_multiprocessing", "_xxsubinterpreters", "_interpreters", "interpreters",
               # library helpers that start a thread or process of their own
               "logging.handlers.QueueListener", "logging.config.listen", "faulthandler.dump_traceback_later",
               "socketserver.ThreadingMixIn", "socketserver.ForkingMixIn", "torch.utils.data.DataLoader",
               "torch.utils.data.dataloader")


NETWORK = ("socket", "ssl", "http", "urllib", "urllib3", "requests", "httpx", "aiohttp", "ftplib",
           "smtplib", "poplib", "imaplib", "telnetlib", "xmlrpc", "socketserver", "websocket", "websockets",
           "paramiko", "grpc", "zmq", "webbrowser", "torch.distributed", "_socket", "_ssl", "wsgiref",
           "logging.handlers.SocketHandler", "logging.handlers.DatagramHandler", "logging.handlers.SysLogHandler",
           "logging.handlers.SMTPHandler", "logging.handlers.HTTPHandler")


STREAMS = ("torch.cuda.Stream", "torch.cuda.stream", "torch.cuda.set_stream", "torch.cuda.ExternalStream",
           "torch.cuda.StreamContext", "torch.cuda.streams", "torch.Stream", "torch.cuda.graph",
           "torch.cuda.graphs", "torch.cuda.CUDAGraph", "torch.cuda.make_graphed_callables",
           "torch.cuda.set_sync_debug_mode")


FOREIGN = ("torch.utils.cpp_extension", "cupy", "numba", "pycuda", "cuda", "jax", "tensorflow", "tvm",
           "tilelang", "cutlass", "pyopencl", "taichi", "torch.cuda.jiterator", "torch.cuda._compile_kernel",
           "scipy", "numexpr", "sklearn")


def _table_guard(source: Source, prefixes, guard: str, flag: str, why: str) -> Finding | None:
    for path, node in path_hits(source, prefixes):
        what = f"import {path}" if isinstance(node, (ast.Import, ast.ImportFrom)) else spell(source, node)
        return Finding(guard, f"`{what}` {why}", line_of(node), True, flag)
    return None


def check_concurrency(source: Source, settings: GuardSettings) -> Finding | None:
    """Threads, processes, subprocesses: work the timer and the sandbox cannot follow."""
    return _table_guard(source, CONCURRENCY, "concurrency", "concurrency",
                        "starts threads or processes; do all work in the forward call, in Triton kernels.")


def check_network(source: Source, settings: GuardSettings) -> Finding | None:
    return _table_guard(source, NETWORK, "network", "network",
                        "uses the network; a candidate must compute everything locally in Triton kernels.")


def check_side_stream(source: Source, settings: GuardSettings) -> Finding | None:
    """Work on another CUDA stream or in a graph escapes the timer's events."""
    found = _table_guard(source, STREAMS, "side_stream", "side_stream",
                         "moves work off the current CUDA stream; launch kernels on the default stream.")
    if found:
        return found
    for s in source.sites:
        n = s.node
        if isinstance(n, ast.Attribute) and n.attr in ("wait_stream", "record_stream", "wait_event"):
            return Finding("side_stream", f"`{spell(source, n)}` synchronizes CUDA streams; launch kernels "
                           "on the default stream.", line_of(n), True, "side_stream")
    return None


def check_foreign_kernel(source: Source, settings: GuardSettings) -> Finding | None:
    return _table_guard(source, FOREIGN, "foreign_kernel", "foreign_kernel",
                        "computes outside Triton; krefine evaluates @triton.jit kernels only.")


_FS_ALWAYS = ("os.write", "os.writev", "os.pwrite", "os.fdopen", "os.dup", "os.dup2", "os.close",
              "os.closerange", "os.open", "os.chdir", "os.fchdir", "os.chroot", "os.truncate",
              "os.ftruncate", "os.mkfifo", "os.mknod", "shutil", "tempfile", "io.FileIO")


_FS_PATH_ARG = ("os.remove", "os.unlink", "os.rmdir", "os.removedirs", "os.rename", "os.renames",
                "os.replace", "os.makedirs", "os.mkdir", "os.chmod", "os.chown", "os.link", "os.symlink",
                "os.utime", "builtins.open", "io.open", "codecs.open", "torch.save", "torch.load",
                "numpy.save", "numpy.savez", "numpy.savetxt", "numpy.load")


_FS_METHODS = words("write_text write_bytes touch unlink rmdir mkdir symlink_to hardlink_to rename tofile")

# the kernel's pseudo-files: /proc/self/mem, /proc/<pid>/fd/3, /dev/mem, /sys/...
_PSEUDO_FILES = re.compile(r"^/*proc(/|$)|^/+(sys|dev)(/|$)(?!/*null$)")


def check_filesystem(source: Source, settings: GuardSettings) -> Finding | None:
    """Opening files for writing, raw descriptors, deletes, renames or directories outside
    the temp cwd, absolute paths. A kernel needs no files."""
    def bad(node, what):
        return Finding("filesystem", f"`{what}` touches files outside the candidate's temp directory; "
                       "a kernel needs no files.", line_of(node), True, "filesystem")

    for path, node in path_hits(source, _FS_ALWAYS):
        return bad(node, f"import {path}" if isinstance(node, (ast.Import, ast.ImportFrom)) else spell(source, node))
    for r in source.refs:
        if not r.called or not any(under(p, _FS_PATH_ARG) for p in r.paths):
            continue
        call = r.site.parent
        target = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg in ("file", "f", "path")), None)
        mode = next((k.value for k in call.keywords if k.arg == "mode"), call.args[1] if len(call.args) > 1 else None)
        is_open = any(under(p, ("builtins.open", "io.open", "codecs.open")) for p in r.paths)
        literal = isinstance(target, ast.Constant) and isinstance(target.value, str)
        if not literal or target.value.startswith(("/", "~")) or ".." in target.value.split("/") or \
                "\\" in target.value:
            return bad(call, spell(source, call))
        if is_open and _writes(mode):
            return bad(call, spell(source, call))
    for s in source.sites:
        n = s.node
        if isinstance(n, ast.Attribute) and n.attr == "open" and isinstance(s.parent, ast.Call) \
                and s.parent.func is n and not resolve(n.value, source.aliases, source.self_attrs, frozenset()):
            call = s.parent   # Path(...).open("w")
            mode = next((k.value for k in call.keywords if k.arg == "mode"), call.args[0] if call.args else None)
            if _writes(mode):
                return bad(call, spell(source, call))
        if isinstance(n, ast.Attribute) and n.attr in _FS_METHODS and isinstance(s.parent, ast.Call) \
                and s.parent.func is n:
            if not resolve(n.value, source.aliases, source.self_attrs, frozenset()) or \
                    any(under(p, ("pathlib", "numpy")) for p in
                        resolve(n.value, source.aliases, source.self_attrs, frozenset())):
                return bad(n, spell(source, s.parent))
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and _PSEUDO_FILES.match(n.value) \
                and not isinstance(s.parent, ast.Expr) and s.region != DEAD:   # a docstring runs nothing
            return bad(n, repr(n.value)[:60])
    return None


def _writes(mode: ast.AST | None) -> bool:
    """An open() mode that writes, or one the guard cannot read."""
    if mode is None:
        return False
    if not (isinstance(mode, ast.Constant) and isinstance(mode.value, str)):
        return True
    return any(c in mode.value for c in "wax+")
