#!/usr/bin/env bash
# The persistent judge's GPU checks (issue 9), in stages that each fit one device call:
#   bash benchmarks/gpu_judge_checks.sh OUT_DIR KERNELBENCH_DIR STAGE...
# smoke      krefine eval of the four gate candidates in one session (JSON lines)
# small      P1 on the small problems: session, batch, standalone (+ before), KernelBench
# large      P1 on KernelBench level-1 problems of real size
# repeat     P2: one candidate judged 5 times in 5 processes, per small problem
# tests      evaluator GPU tests (transfer, hang, illegal address, timer, profile, judge)
# redteam-a / redteam-b   the red-team suite on the GPU, in two halves
set -uo pipefail
out=${1:?out dir}; kb=${2:?KernelBench checkout}; shift 2
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi -L | tee "$out/gpu.txt"
for stage in "$@"; do
  echo "== $stage $(date +%T)"
  case $stage in
    smoke)
      timeout 240 python3 -m agent.cli eval examples/relu.py benchmarks/throughput/gate_{correct,incorrect,compile_error,rejected}.py \
        --json 2>&1 | tee "$out/smoke.jsonl" | cut -c1-400 ;;
    small)
      timeout 560 python3 benchmarks/judge_throughput.py --kb "$kb" --out "$out/small.json" --before .before \
        --before-only gate --only ${ONLY:-gate,softmax,matmul} 2>&1 | tee "$out/small.log" | cut -c1-600 ;;
    large)
      timeout 560 python3 benchmarks/judge_throughput.py --kb "$kb" --out "$out/large.json" \
        --only kb_19_relu,kb_1_matmul --stages session,standalone,kb 2>&1 | tee "$out/large.log" | cut -c1-600 ;;
    repeat)
      timeout 560 python3 benchmarks/judge_throughput.py --out "$out/repeat.json" --stages repeat \
        --only gate,matmul 2>&1 | tee "$out/repeat.log" | cut -c1-600 ;;
    tests)
      timeout 400 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_evaluate_transfer.py \
        tests/test_evaluate_gpu.py tests/test_judge.py 2>&1 | tee "$out/gpu_tests.log" | tail -15 ;;
    redteam-a)
      timeout 560 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_exploits.py -k "not (ok_ or t or s)" 2>&1 \
        | tee "$out/redteam_a.log" | tail -8 ;;
    redteam-b)
      timeout 560 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_exploits.py -k "ok_ or t or s" 2>&1 \
        | tee "$out/redteam_b.log" | tail -8 ;;
    *) echo "unknown stage $stage" >&2; exit 2 ;;
  esac
done
