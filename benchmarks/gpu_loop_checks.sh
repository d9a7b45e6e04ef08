#!/usr/bin/env bash
# The loop's and bench's GPU checks in one run (a few minutes on one GPU): the replay
# story on examples/relu.py with the time per round split by phase, then `krefine
# bench` over KernelBench level-1 matmul problems with hand-written replayed candidates.
#   bash benchmarks/gpu_loop_checks.sh OUT_DIR KERNELBENCH_DIR
set -uo pipefail
export KREFINE_KEEP_JUDGE_S=0   # krefine eval in fresh processes judges in-process; no judge service outlives a stage
out=${1:?out dir}; kb=${2:?KernelBench checkout}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
timeout 45 python3 -m pytest -q -p no:cacheprovider tests/test_evaluate_gpu.py -k hung 2>&1 | tail -3
timeout 100 python3 -m agent.cli run examples/relu.py --model replay:examples/relu.replay.jsonl \
  --candidates 1 --out "$out/run_relu" > "$out/run_relu.log" 2>&1; echo "run rc=$?"; tail -6 "$out/run_relu.log"
python3 benchmarks/round_split.py "$out/run_relu" | tee "$out/round_split.txt"
timeout 120 python3 -m agent.cli bench "$kb/KernelBench/level1" --filter '^(1|2|4|8)_' \
  --model "replay:benchmarks/replays/{problem}.jsonl" --out "$out/bench" 2>&1 | tail -30 | tee "$out/bench.log"
