#!/usr/bin/env bash
# KernelBench's own harness beside krefine's verdicts, in one run of BUDGET_S seconds:
#   bash benchmarks/kb_harness_gpu.sh OUT BUDGET_S LEVEL_DIR [LEVEL_DIR ...]
#   e.g. bash benchmarks/kb_harness_gpu.sh $OUT 570 .kb/level1 .kb/level2    (needs .kb; offline, .whl too)
# 0) set-up: krefine's wheels (.whl, .whl/extra; for a machine without network) into /tmp/site
#    once per machine, when .whl is there; the level dirs
#    copied side by side into one suite, SUITE (/tmp/kbsuite: one queue feeds every GPU; problems
#    are named level1__19_ReLU, ...); a previous run's OUT files, copied into PREV
#    (default .kb/prev: bench.tgz, seeds.tgz, kb_harness.jsonl), unpacked so both stages resume;
# 1) `krefine bench` over the suite with the Inductor seed and no model (--model none,
#    search.sweep_variants=${SWEEP:-0}: the seed alone; SWEEP=3 adds best.py variants), on every
#    GPU, until HARNESS_S (default 240) seconds before BUDGET_S; the bench and the seed cache go to
#    OUT every SNAP_S (60) seconds, so a run cut off (by `timeout`, SIGTERM) still leaves them;
# 2) benchmarks/kb_harness.py over that bench with the time left (all of it when the bench is
#    done): KernelBench's eval_kernel_against_ref on each seed (and best), a fresh process each,
#    one per GPU, at most EVAL_S (300) seconds each; the JSONL and the table grow in OUT as it goes.
# FILTER (a regex over the names above) narrows both stages. Back in OUT, five files:
# kb_harness.jsonl, kb_harness.md, bench.tgz, seeds.tgz, log.txt. Python 3.12 + torch + triton
# and KernelBench's imports (numpy, pydantic, requests: installed, or in .whl; its LLM
# clients are stubbed) are all it needs; nothing is fetched.
set -u
out=${1:?out}; budget=${2:?budget seconds}; shift 2
levels=("$@"); [ ${#levels[@]} -gt 0 ] || { echo "kb_harness_gpu.sh: name at least one level dir" >&2; exit 2; }
for L in "${levels[@]}"; do [ -d "$L" ] || { echo "kb_harness_gpu.sh: $L: no such level dir" >&2; exit 2; }; done
[ -f .kb/src/kernelbench/eval.py ] || { echo "kb_harness_gpu.sh: .kb/src/kernelbench/eval.py missing (copy a KernelBench checkout to .kb)" >&2; exit 2; }
mkdir -p "$out"
exec > >(tee -a "$out/log.txt") 2>&1
export PYTHONPATH=$PWD:/tmp/site:${PYTHONPATH:-} PYTHONUNBUFFERED=1 KREFINE_KEEP_JUDGE_S=0
bench=${BENCH_DIR:-/tmp/kbbench}; seeds=${SEEDS:-/tmp/kbseeds}; suite=${SUITE:-/tmp/kbsuite}; prev=${PREV:-.kb/prev}
harness_s=${HARNESS_S:-240}; sweep=${SWEEP:-0}
left() { echo $((budget - SECONDS)); }

# 0) set-up
if [ ! -d /tmp/site/langgraph ] && [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl $(ls .whl/extra/*.whl 2>/dev/null)
fi
rm -rf "$suite"; mkdir -p "$suite"
for L in "${levels[@]}"; do cp -r "$L" "$suite/$(basename "$L")"; done
[ -d "$bench" ] || { [ -f "$prev/bench.tgz" ] && tar -xzf "$prev/bench.tgz" -C "$(dirname "$bench")"; }
[ -d "$seeds" ] || { [ -f "$prev/seeds.tgz" ] && tar -xzf "$prev/seeds.tgz" -C "$(dirname "$seeds")"; }
[ -f "$out/kb_harness.jsonl" ] || { [ -f "$prev/kb_harness.jsonl" ] && cp "$prev/kb_harness.jsonl" "$out/"; }
mkdir -p "$bench" "$seeds"
ngpu=$(nvidia-smi -L | wc -l)
echo "== $(date +%T) $ngpu GPU(s); levels: ${levels[*]}; $(left) s left"
# the checkpoint cache is never read back (a resume rebuilds from the run's files): left out
snap() { tar -czf "$out/.bench.tmp" --exclude=checkpoint.sqlite -C "$(dirname "$bench")" "$(basename "$bench")" 2>/dev/null \
           && mv "$out/.bench.tmp" "$out/bench.tgz"
         tar -czf "$out/.seeds.tmp" -C "$(dirname "$seeds")" "$(basename "$seeds")" 2>/dev/null \
           && mv "$out/.seeds.tmp" "$out/seeds.tgz"; }
filter=(); [ -n "${FILTER:-}" ] && filter=(--filter "$FILTER")

# 1) the bench: the seed alone on every GPU; its own limit leaves ~30 s for a SIGTERM to unwind it
(while sleep "${SNAP_S:-60}"; do snap; done) & snapper=$!
if [ $(( $(left) - harness_s )) -gt 60 ]; then
  echo "== bench $(date +%T) ($SECONDS s)"
  timeout -k 20 $(( $(left) - harness_s - 30 )) python3 -m agent.cli bench "$suite" "${filter[@]}" \
    --model none --set search.seed_kernel=inductor --set "search.seed_cache=$seeds" \
    --set search.seed_timeout_s=${SEED_S:-400} --set search.sweep_budget=3 --set bench.seed_jobs=${SEED_JOBS:-4} \
    --config benchmarks/kb_memory.toml --device cuda --gpus "$ngpu" --out "$bench" \
    --sweep "search.sweep_variants=$sweep" 2>&1 | grep -v "^\s*$" | tail -${TAIL:-60}
fi
kill $snapper 2>/dev/null; wait $snapper 2>/dev/null
snap

# 2) KernelBench's harness over what the bench judged, with the time left
if [ "$(left)" -gt 30 ]; then
  echo "== KernelBench's harness $(date +%T) ($SECONDS s)"
  timeout -k 10 $(( $(left) - 15 )) python3 benchmarks/kb_harness.py "$bench" --kb .kb --levels "${levels[@]}" \
    --setting "search.sweep_variants=$sweep" --gpus "$ngpu" --timeout-s ${EVAL_S:-300} "${filter[@]}" \
    --out "$out/kb_harness.jsonl" --table "$out/kb_harness.md"
  echo "== harness exit $? ($SECONDS s)"
fi
echo "== end $(date +%T) ($SECONDS s)"
