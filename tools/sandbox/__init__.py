"""The sandbox room: where candidate code runs, and how the judge talks to it.

isolation.py is the isolation call (`start_worker`: temp dir, scrubbed environment
from env.py, limits, own process group) and `start_forkserver`; the worker runs as `python -m
tools.sandbox.worker` (worker.py, with lockdown.py, launches.py, measure_ops.py,
outputs.py, watch.py, integrity.py and faults.py), forked by `python -m tools.sandbox.forkserver` when the judge
keeps one; channel.py frames the messages and cudaipc.py hands outputs over through GPU
memory. Nothing here decides a verdict (tools/judge/ does).

This file only re-exports the isolation call's names, and must never import worker.py
or forkserver.py: they run as `python -m`, and importing them first would load them
twice.
"""
from tools.sandbox.isolation import (WorkerDied, WorkerProcess, WorkerTimeout, start_forkserver, start_worker,
                                     worker_env)

__all__ = ["WorkerDied", "WorkerProcess", "WorkerTimeout", "start_forkserver", "start_worker", "worker_env"]
