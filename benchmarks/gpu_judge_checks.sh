#!/usr/bin/env bash
# The judge's and the KernelBook dialect's GPU checks, in stages that can be run one at a
# time (each under its own timeout):
#   bash benchmarks/gpu_judge_checks.sh OUT_DIR KERNELBENCH_DIR STAGE...
# On a GPU machine without network access (with .whl, .kb and .before copied into the
# checkout): the stage `setup` installs krefine's dependencies from the wheels in .whl/
# into /tmp/site; every later stage finds them on PYTHONPATH. Where pip works, install
# krefine normally and leave `setup` out.
# smoke      krefine eval of the four gate candidates in one session (JSON lines)
# gputests   evaluator, timer, judge, transfer, dialect and story GPU tests
# small      P1 on the small problems: session, batch, standalone (+ .before for gate), KernelBench
# large      P1 on KernelBench level-1 problems of real size (KernelBench in fresh processes)
# repeat     P2: one candidate judged 5 times in 5 processes, per problem
# ncu        P2: the verdict's timed figure against an independent ncu run (single-kernel candidates)
# redteam    the red-team suite on the GPU (one judge session per problem)
# corpus     build the KernelBook corpus on the GPU, unpack it, judge it on the GPU
# seeded     krefine run with the Inductor seed and the KernelBook replay
# loop       rounds per minute of the replayed story, this checkout and .before
# timeline   standalone krefine eval mark by mark, the start-up pieces, KernelBench fresh
# cases      standalone krefine eval through the judge service per problem, beside KernelBench fresh
set -uo pipefail
export KREFINE_KEEP_JUDGE_S=0   # krefine eval in fresh processes judges in-process; no judge service outlives a stage
out=${1:?out dir}; kb=${2:?KernelBench checkout}; shift 2
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1
# stages are each cut at their own limit; what they wrote under $out stays
run() { local limit=$1; shift; timeout "$limit" "$@"; echo "   -> exit $? after $SECONDS s"; }
nvidia-smi -L | tee "$out/gpu.txt"
for stage in "$@"; do
  echo "== $stage $(date +%T) ($SECONDS s)"
  case $stage in
    setup)
      [ -d /tmp/site/langgraph ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
        --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
      python3 -c "import langgraph, pydantic, nvtx, torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" ;;
    smoke)
      run 240 python3 -m agent.cli eval examples/relu.py benchmarks/throughput/gate_{correct,incorrect,compile_error,rejected}.py \
        --json 2>&1 | tee "$out/smoke.jsonl" | cut -c1-300 ;;
    gputests)
      run "${LIMIT:-420}" python3 -m pytest -q -p no:cacheprovider -m gpu ${TESTS:-tests/test_evaluate_gpu.py tests/test_timer.py \
        tests/test_judge.py tests/test_evaluate_transfer.py tests/test_dialect.py tests/test_runner.py} 2>&1 \
        | tee "$out/gpu_tests.log" | grep -E "passed|failed|FAILED|Error" | tail -15 ;;
    small)
      run 560 python3 benchmarks/judge_throughput.py --kb "$kb" --out "$out/small.json" --before .before \
        --before-only gate --only "${ONLY:-gate,softmax,matmul}" 2>&1 | tee "$out/small.log" | cut -c1-400 ;;
    large)
      run 560 python3 benchmarks/judge_throughput.py --kb "$kb" --out "$out/large.json" --kb-modes fresh \
        --only "${LARGE:-kb_19_relu,kb_1_matmul}" --stages "${STAGES:-session,standalone,kb}" 2>&1 | tee "$out/large.log" | cut -c1-400 ;;
    repeat)
      run 400 python3 benchmarks/judge_throughput.py --kb "$kb" --out "$out/repeat.json" --stages repeat \
        --only "${ONLY:-gate,relu_8192,kb_1_matmul}" 2>&1 | tee "$out/repeat.log" | cut -c1-400 ;;
    ncu)
      run 400 python3 benchmarks/ncu_agreement.py --kb "$kb" --out "$out/ncu.json" --pairs \
        "${PAIRS:-benchmarks/throughput/relu_4096.py:benchmarks/candidates/kb_19_relu.py,benchmarks/throughput/relu_8192.py:benchmarks/candidates/kb_19_relu.py,1_Square_matrix_multiplication_.py:kb_1_matmul.py}" \
        2>&1 | tee "$out/ncu.log" | cut -c1-400 ;;
    redteam)
      run 560 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_exploits.py 2>&1 \
        | tee "$out/redteam.log" | grep -E "passed|failed|FAILED|Error" | tail -15 ;;
    corpus)
      run 420 python3 benchmarks/kernelbook_corpus.py --out "$out" 2>&1 | tee "$out/corpus.log" | grep -vE "Warning|warn" | tail -22
      python3 benchmarks/kernelbook_corpus.py --unpack "$out/kernelbook_corpus.json" --dest tests/dialect/candidates_gpu >/dev/null
      run 300 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_kernelbook.py 2>&1 \
        | tee "$out/corpus_tests.log" | grep -E "passed|failed|FAILED|Error" | tail -15 ;;
    seeded)
      printf '[search]\nseed_kernel = "inductor"\n' > /tmp/seeded.toml
      run 300 python3 -m agent.cli run examples/relu.py --config /tmp/seeded.toml --candidates 1 \
        --model replay:examples/relu.kernelbook.replay.jsonl --out /tmp/seeded_run 2>&1 | tee "$out/seeded.log" | tail -12
      cp /tmp/seeded_run/summary.json "$out/seeded_summary.json"; cp /tmp/seeded_run/trace.jsonl "$out/seeded_trace.jsonl"
      run 200 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_runner.py -k kernelbook 2>&1 \
        | tee "$out/kbstory.log" | grep -E "passed|failed|FAILED|Error" | tail -5 ;;
    loop)
      run 400 python3 benchmarks/loop_rate.py --out "$out/loop.json" --before .before 2>&1 | tee "$out/loop.log" | tail -8 ;;
    timeline)
      run 400 python3 benchmarks/standalone_timeline.py --out "$out/timeline.json" --kb "$kb" --runs "${RUNS:-3}" \
        --variants "${VARIANTS:-default,no_compile_baseline,rejected,service}" 2>&1 | tee "$out/timeline.log" ;;
    cases)
      run 560 python3 benchmarks/standalone_timeline.py --out "$out/cases.json" --kb "$kb" --runs "${RUNS:-2}" \
        --variants cases --snippets "" --cases "${CASES:-gate,softmax,matmul,kb_1_matmul}" 2>&1 | tee "$out/cases.log" ;;
    *) echo "unknown stage $stage" >&2; exit 2 ;;
  esac
done
echo "== done $(date +%T) ($SECONDS s)"
