#!/usr/bin/env bash
# KernelBench's levels through `krefine bench --model none` from one frozen code version, in runs of
# BUDGET seconds that resume each other, and KernelBench's own harness beside krefine's verdicts.
#
#   bash benchmarks/kernelbench.sh prepare COMMIT KERNELBENCH
#     on a machine with this git checkout: COMMIT's tree into .kb/code-COMMIT (git-ignored) and
#     KernelBench's level1/ and level2/ into .kb/ (KERNELBENCH: a checkout of
#     ScalingIntelligence/KernelBench, or its git dir; its src/ goes to .kb/src for the harness)
#   [LEVELS=".kb/level1 .kb/level2"] [FILTER=regex] [BUDGET=570] [PREV=.kb/prev] \
#     bash benchmarks/kernelbench.sh search COMMIT OUT
#     on the GPU machine: the search (the Inductor seed portfolio, then the pre-screened constant sweep:
#     PRESCREEN variants per sweep checked and timed on one input, the fastest SWEEP judged in full,
#     SWEEP_BUDGET per run) on every GPU, in what is left of BUDGET seconds
#   [LEVELS=...] [FILTER=...] [BUDGET=570] [PREV=...] [HARNESS_S=240] [TEMPLATES_S=0] \
#     bash benchmarks/kernelbench.sh harness COMMIT OUT
#     the seed alone on every GPU, then KernelBench's eval_kernel_against_ref on each seed (and best),
#     a fresh process each, one per GPU (python -m agent.bench.kb_harness), in the last HARNESS_S seconds
#   Every GPU: nvidia-smi's, or those CUDA_VISIBLE_DEVICES lists. LEVELS=.kb/level3 after copying
#   KernelBench/level3 there.
#
# Problems are named level1__19_ReLU, ... (one suite, one queue for every GPU). A run resumes from
# PREV: copy OUT's bench.tgz, seeds.tgz (and kb_harness.jsonl) there after each run. OUT gets
# bench.tgz, seeds.tgz, results.md, results.json, log.txt (the bench's last TAIL lines), bench.log (all
# of its output) (and kb_harness.jsonl, kb_harness.md); the
# tables: python -m agent.bench.kb_search_table BENCH_DIR --logs OUT*/log.txt --json PART.json, and
# --parts PART.json ... --out TABLE.md to merge parts. Where pip cannot reach an index, wheels in .whl/
# (and .whl/extra/) are installed into /tmp/site first. COMMIT `.` runs this checkout as it is; `harness`
# needs a COMMIT with agent/bench/kb_harness.py.
set -u
cmd=${1:-}; commit=${2:-}
die() { echo "kernelbench.sh: $*" >&2; exit 2; }
usage="usage: prepare COMMIT KERNELBENCH | search COMMIT OUT | harness COMMIT OUT"
[ -n "$commit" ] || die "$usage"
if [ "$commit" = . ]; then code=$PWD; else code=$PWD/.kb/code-$commit; fi

# 1) prepare: the frozen tree and KernelBench's levels (and src/)
if [ "$cmd" = prepare ]; then
  kb=${3:-}; [ -n "$kb" ] || die "prepare: name a KernelBench checkout or git dir"
  if [ "$commit" != . ]; then
    git rev-parse --verify -q "$commit^{commit}" >/dev/null || die "$commit: no such commit here"
    mkdir -p "$code" && git archive "$commit" | tar -x -C "$code" && echo "$commit" > "$code/COMMIT" || die "$code: extract failed"
  fi
  rm -rf .kb/level1 .kb/level2 .kb/src; mkdir -p .kb
  if [ -d "$kb/KernelBench/level1" ]; then
    cp -r "$kb/KernelBench/level1" "$kb/KernelBench/level2" "$kb/src" .kb/ \
      && (cd "$kb" && git rev-parse --short HEAD 2>/dev/null) > .kb/KERNELBENCH
  elif git --git-dir="$kb" rev-parse -q --verify HEAD >/dev/null 2>&1; then
    git --git-dir="$kb" archive HEAD KernelBench/level1 KernelBench/level2 | tar -x -C .kb --strip-components=1 \
      && git --git-dir="$kb" archive HEAD src | tar -x -C .kb && git --git-dir="$kb" rev-parse --short HEAD > .kb/KERNELBENCH
  else
    die "$kb: neither a KernelBench checkout (KernelBench/level1) nor its git dir"
  fi
  echo "$code; KernelBench $(cat .kb/KERNELBENCH): $(ls .kb/level1 | wc -l) + $(ls .kb/level2 | wc -l) problems"
  exit 0
fi
[ "$cmd" = search ] || [ "$cmd" = harness ] || die "$usage"
out=${3:-}; [ -n "$out" ] || die "$cmd: name an OUT directory"
[ "$commit" = . ] || [ -f "$code/COMMIT" ] || die "$code: not prepared (run: prepare $commit KERNELBENCH)"
budget=${BUDGET:-570}; prev=$(realpath -m "${PREV:-.kb/prev}"); out=$(realpath -m "$out")
read -ra levels <<< "${LEVELS:-.kb/level1 .kb/level2}"
for L in "${levels[@]}"; do [ -d "$L" ] || die "$L: no such level dir"; done
levels=($(realpath "${levels[@]}")); kbroot=$(realpath -m .kb)
[ "$cmd" = search ] || [ -f "$kbroot/src/kernelbench/eval.py" ] || die ".kb/src/kernelbench/eval.py missing (run prepare)"
mkdir -p "$out"; exec > >(tee -a "$out/log.txt") 2>&1
left() { echo $((budget - SECONDS)); }

# 2) set-up: wheels where there is no index, one suite of every level, what PREV holds
if [ ! -d /tmp/site/langgraph ] && [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl $(ls .whl/extra/*.whl 2>/dev/null)
fi
cd "$code" || die "$code: missing"
export PYTHONPATH=$PWD:/tmp/site:${PYTHONPATH:-} PYTHONUNBUFFERED=1 KREFINE_KEEP_JUDGE_S=0
bench=/tmp/kbsearch; [ "$cmd" = harness ] && bench=/tmp/kbbench; seeds=/tmp/kbseeds; suite=/tmp/kbsuite
rm -rf "$suite"; mkdir -p "$suite"
for L in "${levels[@]}"; do for f in "$L"/*.py; do cp "$f" "$suite/$(basename "$L")__$(basename "$f")"; done; done
[ -d "$bench" ] || { [ -f "$prev/bench.tgz" ] && tar -xzf "$prev/bench.tgz" -C /tmp; }
[ -d "$seeds" ] || { [ -f "$prev/seeds.tgz" ] && tar -xzf "$prev/seeds.tgz" -C /tmp; }
[ "$cmd" = search ] || [ -f "$out/kb_harness.jsonl" ] || { [ -f "$prev/kb_harness.jsonl" ] && cp "$prev/kb_harness.jsonl" "$out/"; }
mkdir -p "$bench" "$seeds"
ngpu=$(nvidia-smi -L | wc -l)   # or the GPUs CUDA_VISIBLE_DEVICES leaves visible
[ -n "${CUDA_VISIBLE_DEVICES:-}" ] && ngpu=$(tr ',' '\n' <<< "$CUDA_VISIBLE_DEVICES" | grep -c .)
# kb_search_table.py reads this line for the GPU-hours
echo "== $(date +%T) $ngpu GPU(s); $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1); code $(cat COMMIT 2>/dev/null || git describe --always --dirty --abbrev=7 2>/dev/null || echo unknown)"
filter=(); [ -n "${FILTER:-}" ] && filter=(--filter "$FILTER")
snap() { tar -czf "$out/.bench.tmp" --exclude=checkpoint.sqlite -C /tmp "$(basename "$bench")" && mv "$out/.bench.tmp" "$out/bench.tgz"
         tar -czf "$out/.seeds.tmp" -C /tmp "$(basename "$seeds")" && mv "$out/.seeds.tmp" "$out/seeds.tgz"; }
common=(--model none --set search.seed_kernel=inductor --set "search.seed_cache=$seeds" --set "search.templates_timeout_s=${TEMPLATES_S:-0}"
        --set bench.seed_jobs=${SEED_JOBS:-4} --config benchmarks/kb_memory.toml --device cuda --gpus "$ngpu" --out "$bench")

# 3) the bench, stopped in time to leave its files (and, for harness, the harness's share)
(while sleep 60; do snap 2>/dev/null; done) & snapper=$!
if [ "$cmd" = search ]; then
  timeout -k 20 $(( $(left) - ${SNAP:-40} )) python3 -m agent.cli bench "$suite" "${filter[@]}" "${common[@]}" \
    --set search.seed_timeout_s=${SEED_S:-300} \
    --set search.prescreen_variants=${PRESCREEN:-32} --set search.prescreen_reps=${REPS:-10} \
    --set search.sweep_variants=${SWEEP:-2} --set search.sweep_budget=${SWEEP_BUDGET:-4} \
    2>&1 | tee -a "$out/bench.log" | grep -v "^\s*$" | tail -${TAIL:-40}
elif [ $(( $(left) - ${HARNESS_S:-240} )) -gt 60 ]; then
  timeout -k 20 $(( $(left) - ${HARNESS_S:-240} - 30 )) python3 -m agent.cli bench "$suite" "${filter[@]}" "${common[@]}" \
    --set search.seed_timeout_s=${SEED_S:-400} --set search.sweep_budget=3 --sweep "search.sweep_variants=${SWEEP:-0}" \
    2>&1 | tee -a "$out/bench.log" | grep -v "^\s*$" | tail -${TAIL:-60}
fi
kill $snapper 2>/dev/null; wait $snapper 2>/dev/null; snap
cp "$bench"/results.md "$bench"/results.json "$out/" 2>/dev/null || true

# 4) KernelBench's harness over what the bench judged, with the time left
if [ "$cmd" = harness ] && ! compgen -G "$bench/*/*/run.json" >/dev/null; then
  echo "== KernelBench's harness: nothing judged yet (the seeds took the run); the next run resumes ($SECONDS s)"
elif [ "$cmd" = harness ] && [ "$(left)" -gt 30 ]; then
  echo "== KernelBench's harness $(date +%T) ($SECONDS s)"
  timeout -k 10 $(( $(left) - 15 )) python3 -m agent.bench.kb_harness "$bench" --kb "$kbroot" --levels "${levels[@]}" \
    --setting "search.sweep_variants=${SWEEP:-0}" --gpus "$ngpu" --timeout-s ${EVAL_S:-300} "${filter[@]}" \
    --out "$out/kb_harness.jsonl" --table "$out/kb_harness.md"
  echo "== harness exit $? ($SECONDS s)"
fi
echo "== end $(date +%T) ($SECONDS s)"
