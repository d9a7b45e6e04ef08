#!/usr/bin/env bash
# The evaluator's GPU checks in one device call (issue 2): GPU tests, the GPU-only and
# correct red-team cases on CUDA, `krefine eval` with the profile step (ncu when
# present) on a KernelBench problem, and the throughput/repeatability benchmark.
#   bash benchmarks/gpu_eval_checks.sh OUT_DIR KERNELBENCH_DIR
set -uo pipefail
out=${1:?out dir}; kb=${2:?KernelBench checkout}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi -L | tee "$out/gpu.txt"
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_evaluate_gpu.py tests/test_exploits.py \
  -k "test_evaluate_gpu or (cuda and (illegal_address or library_time_share or tf32 or ok_ or cache or stream or deferred or hang or oob or empty or nan))" \
  2>&1 | tee "$out/gpu_tests.log" | tail -25
timeout 120 python3 -m agent.cli eval "$kb/KernelBench/level1/19_ReLU.py" benchmarks/candidates/kb_19_relu.py --json \
  > "$out/eval_relu.json" 2> "$out/eval_relu.err"; echo "eval rc=$?"; tail -3 "$out/eval_relu.err"
python3 -c "import json,sys; v=json.load(open('$out/eval_relu.json')); print(v['verdict'], v['speedup'], v['checks'].get('phase_s'), v['checks'].get('ncu')); print((v.get('bottleneck') or {}).get('summary'))"
timeout 330 python3 benchmarks/eval_throughput.py --kb "$kb" --out "$out/eval_throughput.json" --repeat 5 2>&1 \
  | grep -v "^\[Profiling\]\|^Using PyTorch" | tee "$out/bench.log" | tail -20
