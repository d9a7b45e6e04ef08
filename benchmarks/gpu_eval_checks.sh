#!/usr/bin/env bash
# The evaluator's GPU checks, in stages that can be run one at a time (each under its own timeout):
#   bash benchmarks/gpu_eval_checks.sh OUT_DIR KERNELBENCH_DIR STAGE...
# tests      evaluator GPU tests (output transfer, hang / illegal address, timer, profile)
# ncu        `krefine eval` with ncu on KernelBench problems beside an independent ncu run
# throughput ours vs KernelBench's eval_kernel_against_ref, cold and warm
# repeat     one candidate evaluated 5 times: spread of its speedup
# redteam    every red-team case judged on the GPU
set -uo pipefail
export KREFINE_KEEP_JUDGE_S=0   # krefine eval in fresh processes judges in-process; no judge service outlives a stage
out=${1:?out dir}; kb=${2:?KernelBench checkout}; shift 2
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi -L | tee "$out/gpu.txt"
for stage in "$@"; do
  echo "== $stage"
  case $stage in
    tests)
      timeout 300 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_evaluate_transfer.py \
        tests/test_evaluate_gpu.py 2>&1 | tee "$out/gpu_tests.log" | tail -15 ;;
    ncu)
      timeout 400 python3 benchmarks/ncu_agreement.py --kb "$kb" --out "$out/ncu_agreement.json" 2>&1 \
        | grep -v "^\[Profiling\]\|^Using PyTorch" | tee "$out/ncu_agreement.log" | tail -12
      timeout 120 python3 -m agent.cli eval "$kb/KernelBench/level1/1_Square_matrix_multiplication_.py" \
        benchmarks/candidates/kb_1_matmul.py 2>&1 | tee "$out/eval_matmul.txt" | tail -12 ;;
    throughput)
      timeout 560 python3 benchmarks/eval_throughput.py --kb "$kb" --out "$out/eval_throughput.json" \
        --repeat 0 2>&1 | grep -v "^\[Profiling\]\|^Using PyTorch" | tee "$out/throughput.log" | tail -8 ;;
    repeat)
      timeout 400 python3 benchmarks/eval_throughput.py --kb "$kb" --out "$out/repeat.json" \
        --repeat 5 --only Square --no-side-by-side 2>&1 | tee "$out/repeat.log" | tail -4 ;;
    redteam)
      timeout 560 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_exploits.py 2>&1 \
        | tee "$out/redteam.log" | tail -15 ;;
    *) echo "unknown stage $stage" >&2; exit 2 ;;
  esac
done
