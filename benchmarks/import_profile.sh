#!/usr/bin/env bash
# What the fork server's start-up costs on this machine, piece by piece (python -X importtime),
# and whether two processes importing torch at once slow each other (the CLI and the fork server do):
#   bash benchmarks/import_profile.sh OUT_DIR
set -uo pipefail
out=${1:?out dir}
export PYTHONPATH=$PWD:${PYTHONPATH:-}
now() { python3 -c 'import time; print(time.time())'; }
step() { local t; t=$(now); "$@"; python3 -c "import time; print(f'   {time.time() - $t:.2f} s: ' + '''$*''')"; }
step python3 -c "import torch"
step python3 -c "import torch, triton, triton.language"
step python3 -c "import torch, triton, triton.language; from tools import problem; from tools.sandbox import channel, cudaipc, worker; from tools.perf import profiler, timer"
step python3 -c "import torch; from tools.sandbox.forkserver import _warm_lazy_imports; _warm_lazy_imports()"
python3 -X importtime -c "import torch, triton, triton.language; from tools import problem; from tools.sandbox import channel, cudaipc, worker; from tools.perf import profiler, timer
import time; t = time.time(); from tools.sandbox.forkserver import _warm_lazy_imports; _warm_lazy_imports(); print('warm_lazy_imports', time.time() - t)" \
  2> "$out/importtime.txt"
grep -n "tools.sandbox.forkserver" "$out/importtime.txt"
awk -F'|' '/tools.sandbox.forkserver/{f=1} f' "$out/importtime.txt" | sort -t'|' -k2 -n | tail -25
echo "== two torch imports at once"
step bash -c 'python3 -c "import torch" & python3 -c "import torch"; wait'
nproc; cat /sys/fs/cgroup/cpu.max 2>/dev/null
