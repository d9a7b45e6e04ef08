#!/usr/bin/env bash
# The KernelBench search table (benchmarks/kb_search_gpu.sh) from one frozen code version, over as many
# runs and sessions as it takes:
#   bash benchmarks/kb_search_frozen.sh prepare COMMIT KERNELBENCH
#     on a machine with this git checkout: COMMIT's tree into .kb/code-COMMIT (git-ignored), and KernelBench's
#     level1/ and level2/ into .kb/ (KERNELBENCH: a checkout of ScalingIntelligence/KernelBench, or its git dir)
#   [FILTER=regex] [BUDGET=570] [PREV=.kb/prev] [GPU_TESTS="pytest args"] \
#     bash benchmarks/kb_search_frozen.sh run COMMIT OUT
#     on the GPU machine, with .kb and the wheels of ../shared/device/wheels.sh (.whl) beside it: the current
#     tree's GPU tests first when GPU_TESTS names them (OUT/gpu_tests.txt), then the frozen code's
#     kb_search_gpu.sh over .kb/level1 and .kb/level2 in what is left of BUDGET seconds, resuming from PREV's
#     bench.tgz and seeds.tgz (copy OUT's there after each run). Then, for the table:
#     python benchmarks/kb_search_table.py BENCH_DIR --logs OUT*/log.txt --json PART.json [--parts ...]
set -u
cmd=${1:-}; commit=${2:-}
die() { echo "kb_search_frozen.sh: $*" >&2; exit 2; }
[ -n "$commit" ] || die "usage: prepare COMMIT KERNELBENCH | run COMMIT OUT"
code=.kb/code-$commit
case $cmd in
prepare)
  kb=${3:-}; [ -n "$kb" ] || die "prepare: name a KernelBench checkout or git dir"
  git rev-parse --verify -q "$commit^{commit}" >/dev/null || die "$commit: no such commit here"
  mkdir -p "$code" && git archive "$commit" | tar -x -C "$code" && echo "$commit" > "$code/COMMIT" || die "$code: extract failed"
  rm -rf .kb/level1 .kb/level2
  if [ -d "$kb/KernelBench/level1" ]; then
    cp -r "$kb/KernelBench/level1" "$kb/KernelBench/level2" .kb/ && (cd "$kb" && git rev-parse --short HEAD 2>/dev/null) > .kb/KERNELBENCH
  elif git --git-dir="$kb" rev-parse -q --verify HEAD >/dev/null 2>&1; then
    git --git-dir="$kb" archive HEAD KernelBench/level1 KernelBench/level2 | tar -x -C .kb --strip-components=1 \
      && git --git-dir="$kb" rev-parse --short HEAD > .kb/KERNELBENCH
  else
    die "$kb: neither a KernelBench checkout (KernelBench/level1) nor its git dir"
  fi
  echo "$code: $(cat "$code/COMMIT"); KernelBench $(cat .kb/KERNELBENCH): $(ls .kb/level1 | wc -l) + $(ls .kb/level2 | wc -l) problems"
  ;;
run)
  out=${3:-}; [ -n "$out" ] || die "run: name an OUT directory"
  [ -f "$code/COMMIT" ] || die "$code: not prepared (run: prepare $commit KERNELBENCH)"
  budget=${BUDGET:-570}; prev=$(realpath -m "${PREV:-.kb/prev}"); out=$(realpath -m "$out"); mkdir -p "$out"
  if [ ! -d /tmp/site/langgraph ] && [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
  fi
  if [ -n "${GPU_TESTS:-}" ]; then
    echo "== $(date +%T) the current tree's GPU tests: $GPU_TESTS"
    PYTHONPATH=$PWD:/tmp/site timeout -k 5 "${TEST_S:-180}" python3 -m pytest -q -p no:cacheprovider $GPU_TESTS \
      > "$out/gpu_tests.txt" 2>&1
    echo "rc=$?" >> "$out/gpu_tests.txt"; tail -3 "$out/gpu_tests.txt"
  fi
  levels=$(realpath .kb/level1 .kb/level2)
  cd "$code" && echo "code: $(cat COMMIT)" && PREV=$prev bash benchmarks/kb_search_gpu.sh "$out" $(( budget - SECONDS )) $levels
  ;;
*) die "usage: prepare COMMIT KERNELBENCH | run COMMIT OUT" ;;
esac
