"""`krefine judge status|stop`: the judge services `krefine eval` keeps warm.

status: one line per service of this user (device, pid, age, idle life, the problems
whose sessions it keeps); a socket nobody answers on is a dead service's, and its files
are removed. stop: ask every service to exit (each finishes its requests in flight).
Exit 0; 3 when the service directory is unusable (tools/judge/client.py).
"""
from __future__ import annotations

import json
import os
import time

from tools.errors import EXIT_OK


def main(args) -> int:
    from tools.judge import client
    paths = client.services()
    if args.action == "stop":
        stopped = sum(client.stop(p) for p in paths)
        print(f"krefine: asked {stopped} judge service{'' if stopped == 1 else 's'} to stop")
        return EXIT_OK
    found = 0
    for path in paths:
        info = client.ping(path)
        if info is None:
            client.stop(path)   # a dead service's leftovers
            continue
        found += 1
        if args.json:
            print(json.dumps({"socket": str(path), **info}))
            continue
        problems = ", ".join(f"{os.path.basename(s['problem'])} ({s['judged']} judged)"
                             for s in info.get("sessions", [])) or "none yet"
        print(f"{info['device']}:{info['gpu']}  pid {info['pid']}  up {time.time() - info['started']:.0f} s  "
              f"idle life {info['idle_s']:g} s  served {info['served']}  sessions: {problems}")
    if not found and not args.json:
        print("krefine: no judge service is running")
    return EXIT_OK
