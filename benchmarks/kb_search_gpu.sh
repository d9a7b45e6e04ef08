#!/usr/bin/env bash
# The search without a model over KernelBench problems, on every GPU of the machine:
#   FILTER='regex' bash benchmarks/kb_search_gpu.sh OUT BUDGET_S LEVEL_DIR [LEVEL_DIR ...]
#   e.g. FILTER='^level2__(12|29)_' bash benchmarks/kb_search_gpu.sh /tmp/out 540 .kb/level1 .kb/level2
# `krefine bench --model none` with the Inductor seed portfolio (round 0: each Inductor configuration and its
# tf32x3 dots) and the pre-screened sweep (PRESCREEN variants per sweep checked and timed on one input,
# the fastest SWEEP judged in full, SWEEP_BUDGET judged per run). Problems are named level1__19_ReLU, ...;
# a previous run's OUT/bench.tgz and OUT/seeds.tgz, copied into PREV (default .kb/prev), are unpacked
# first so the bench resumes and the seed cache is warm. OUT gets bench.tgz, seeds.tgz, results.md and
# results.json (the bench's table) and log.txt; the bench stops SNAP seconds before BUDGET_S.
set -u
out=${1:?out}; budget=${2:?budget seconds}; shift 2
levels=("$@"); [ ${#levels[@]} -gt 0 ] || { echo "kb_search_gpu.sh: name at least one level dir" >&2; exit 2; }
mkdir -p "$out"; exec > >(tee -a "$out/log.txt") 2>&1
export PYTHONPATH=$PWD:/tmp/site:${PYTHONPATH:-} PYTHONUNBUFFERED=1 KREFINE_KEEP_JUDGE_S=0
bench=/tmp/kbsearch; seeds=/tmp/kbseeds; suite=/tmp/kbsuite; prev=${PREV:-.kb/prev}
if [ ! -d /tmp/site/langgraph ] && [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl $(ls .whl/extra/*.whl 2>/dev/null)
fi
rm -rf "$suite"; mkdir -p "$suite"
for L in "${levels[@]}"; do for f in "$L"/*.py; do cp "$f" "$suite/$(basename "$L")__$(basename "$f")"; done; done
[ -d "$bench" ] || { [ -f "$prev/bench.tgz" ] && tar -xzf "$prev/bench.tgz" -C /tmp; }
[ -d "$seeds" ] || { [ -f "$prev/seeds.tgz" ] && tar -xzf "$prev/seeds.tgz" -C /tmp; }
mkdir -p "$bench" "$seeds"
ngpu=$(nvidia-smi -L | wc -l)
echo "== $(date +%T) $ngpu GPU(s); $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
filter=(); [ -n "${FILTER:-}" ] && filter=(--filter "$FILTER")
timeout -k 20 $(( budget - SECONDS - ${SNAP:-40} )) python3 -m agent.cli bench "$suite" "${filter[@]}" \
  --model none --set search.seed_kernel=inductor --set "search.seed_cache=$seeds" \
  --set search.seed_timeout_s=${SEED_S:-300} --set bench.seed_jobs=${SEED_JOBS:-4} \
  --set search.prescreen_variants=${PRESCREEN:-32} --set search.prescreen_reps=${REPS:-10} \
  --set search.sweep_variants=${SWEEP:-2} --set search.sweep_budget=${SWEEP_BUDGET:-4} \
  --config benchmarks/kb_memory.toml --device cuda --gpus "$ngpu" --out "$bench" 2>&1 | grep -v "^\s*$" | tail -${TAIL:-40}
tar -czf "$out/bench.tgz" --exclude=checkpoint.sqlite -C /tmp "$(basename "$bench")"
tar -czf "$out/seeds.tgz" -C /tmp "$(basename "$seeds")"
cp "$bench"/results.md "$bench"/results.json "$out/" 2>/dev/null || true
echo "== end $(date +%T) ($SECONDS s)"
