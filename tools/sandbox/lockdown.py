"""The worker's lock-down: what it forbids itself before any candidate code runs.

Covers rlimits (no core files, a cap on file size, on cpu a cap on address space), a
private network namespace where the OS allows one (unshare CLONE_NEWNET as root, or
CLONE_NEWUSER|CLONE_NEWNET unprivileged), and a Python audit hook, which cannot be
removed, refusing sockets, os.system/fork/exec, starting any program other than
Triton's toolchain, and writing or deleting files outside the worker's temp dir.
tools/sandbox/worker.py calls `lock_down` once, on its setup request. Not covered:
candidate code shares the worker's process and can tamper inside it (README "Sandbox").
"""
from __future__ import annotations

import ctypes
import os
import resource
import sys

# executables the worker may start: Triton's toolchain and its library lookup
_ALLOWED_EXES = {"ptxas", "ptxas-blackwell", "ldconfig", "gcc", "cc", "clang", "g++",
                 "cuobjdump", "nvdisasm", "nvlink", "fatbinary", "uname", "nvcc"}
_CLONE_NEWUSER, _CLONE_NEWNET = 0x10000000, 0x40000000


def lock_down(setup: dict, workdir: str) -> dict:
    """rlimits, the network namespace and the audit hook, in that order; what was enforced."""
    enforced = {}
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    fsize = int(setup["max_file_mib"]) << 20
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    enforced["max_file_mib"] = setup["max_file_mib"]
    if setup.get("address_space_gib"):
        cap = int(setup["address_space_gib"] * (1 << 30))
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        enforced["address_space_gib"] = setup["address_space_gib"]
    # the ncu pass keeps the audit hook but not the namespace: ncu's injected library
    # talks to its host process over sockets a new network namespace would cut
    enforced["network"] = _private_network() if setup.get("network_isolation", True) else \
        "audit hook only (profiling pass under ncu)"
    sys.addaudithook(_make_audit_hook(workdir))
    enforced["audit_hook"] = "sockets, non-toolchain subprocesses, writes outside the temp dir"
    return enforced


def _private_network() -> str:
    """Enter a fresh network namespace (only loopback, down) if the kernel lets us."""
    if not sys.platform.startswith("linux"):
        return "none (not Linux)"
    libc = ctypes.CDLL(None, use_errno=True)
    for flags, label in ((_CLONE_NEWNET, "netns"), (_CLONE_NEWUSER | _CLONE_NEWNET, "userns+netns")):
        if libc.unshare(flags) == 0:
            return label
    return f"audit hook only (unshare: {os.strerror(ctypes.get_errno())})"


def _make_audit_hook(workdir: str):
    real = os.path.realpath
    root = real(workdir)
    allowed_write = (root, "/dev/null", "/dev/shm", "/proc/self")
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
    allowed_exes = frozenset(_ALLOWED_EXES)   # the hook's own copy: the module's set can be reached and grown

    def hook(event: str, args: tuple) -> None:
        if event in ("socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg",
                     "socket.getaddrinfo"):
            raise PermissionError(f"krefine sandbox: network is not allowed ({event})")
        if event in ("os.system", "os.fork", "os.forkpty", "pty.spawn"):
            raise PermissionError(f"krefine sandbox: {event} is not allowed")
        if event in ("subprocess.Popen", "os.posix_spawn", "os.exec", "os.spawn"):
            exe, argv = (list(args) + [None, None])[:2]
            if event == "os.spawn":
                exe, argv = (list(args) + [None, None, None])[1:3]
            first = exe if isinstance(exe, (str, bytes, os.PathLike)) else \
                (argv[0] if isinstance(argv, (list, tuple)) and argv else "")
            name = os.path.basename(os.fsdecode(first or ""))
            if name not in allowed_exes:
                raise PermissionError(f"krefine sandbox: starting {name!r} is not allowed")
        if event == "open":
            path, mode, flags = (list(args) + [None, None, 0])[:3]
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or \
                      (isinstance(flags, int) and flags & write_flags)
            if writing and isinstance(path, (str, bytes, os.PathLike)):
                p = real(os.fsdecode(path))
                if not any(p == a or p.startswith(a + os.sep) for a in allowed_write):
                    raise PermissionError(f"krefine sandbox: writing {p} is not allowed")
        if event in ("os.remove", "os.rmdir", "os.rename", "shutil.rmtree", "os.truncate"):
            path = args[0]
            if isinstance(path, (str, bytes, os.PathLike)):
                p = real(os.fsdecode(path))
                if not (p == root or p.startswith(root + os.sep)):
                    raise PermissionError(f"krefine sandbox: {event} {p} is not allowed")
    return hook
