#!/usr/bin/env bash
# KernelBench level 1 through `krefine bench` (Inductor seed + constant sweep, no model),
# on every GPU of the device machine, in one device call (issue 19):
#   bash benchmarks/kb_level1_gpu.sh OUT LEVEL_DIR SEED_CACHE MISSING_LIST [BUDGET_S]
# A) seeds of the problems MISSING_LIST names (not in SEED_CACHE: see
#    benchmarks/kb_seed_cache.py), 4 compiles per GPU at once, into the cache, for at most
#    SEED_S seconds (default 240): torch.compile is the slow part of a seed, and the bench
#    itself compiles one problem at a time per GPU;
# B) the sweep pass: SWEEP_FILTER's problems (a regex) with search.sweep_variants=0 and =3;
# C) every problem with search.sweep_variants=0 (the seed alone; B's runs are reused),
#    `--gpus` all of them, until BUDGET_S (default 560) seconds after the start.
# The bench directory (/tmp/kbbench, resumable: carry OUT/bench.tgz back, untar it there
# and call again) and the nvidia-smi log of which process held memory on which GPU go to OUT.
set -u
out=${1:?out}; L=${2:?level dir}; cache=${3:?seed cache}; missing=${4:?missing list}; budget=${5:-560}
export PYTHONPATH=$PWD:/tmp/site:${PYTHONPATH:-} PYTHONUNBUFFERED=1 KREFINE_KEEP_JUDGE_S=0 CACHE=$cache LDIR=$L
bench=${BENCH_DIR:-/tmp/kbbench}; mkdir -p "$bench"
dev=${DEVICE:-cuda}; export DEV=$dev
ngpu=$({ nvidia-smi -L 2>/dev/null || echo cpu; } | tee "$out/gpus.txt" | wc -l)
gpus=(--gpus "$ngpu"); [ "$dev" = cpu ] && gpus=()
(while true; do ts=$(date +%s)
   nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader 2>/dev/null | sed "s/^/$ts, /" >> "$out/compute_apps.csv"
   sleep 5; done) & watch=$!
seed_one() {
  t0=$SECONDS
  CUDA_VISIBLE_DEVICES=$2 timeout 200 python3 -m tools.dialect seed "$LDIR/$1.py" --device "$DEV" --cache "$CACHE" \
    --out /dev/null > "/tmp/seed_$1.err" 2>&1
  echo "seed $1 gpu $2 rc=$? $((SECONDS - t0))s $(tail -1 /tmp/seed_$1.err | cut -c1-120)"
}
export -f seed_one
echo "== A: seeds $(date +%T)"
i=0; for n in $(cat "$missing"); do echo "$n $((i % ngpu))"; i=$((i + 1)); done \
  | timeout "${SEED_S:-240}" xargs -P $((4 * ngpu)) -n 2 bash -c 'seed_one "$0" "$1"'
pkill -f "tools.dialect seed" 2>/dev/null
common=(--model none --set search.seed=inductor --set "search.seed_cache=$cache" --set search.seed_timeout_s=90
        --set search.sweep_budget=3 --config benchmarks/kb_memory.toml --device "$dev" "${gpus[@]}" --out "$bench")
if [ -n "${SWEEP_FILTER:-}" ]; then
  echo "== B: sweep $(date +%T) ($SECONDS s)"
  timeout $((budget - SECONDS)) python3 -m agent.cli bench "$L" "${common[@]}" --filter "$SWEEP_FILTER" \
    --sweep search.sweep_variants=0,3 2>&1 | grep -v "^\s*$" | tail -25
fi
echo "== C: level $(date +%T) ($SECONDS s)"
timeout $((budget - SECONDS)) python3 -m agent.cli bench "$L" "${common[@]}" --sweep search.sweep_variants=0 2>&1 \
  | grep -v "^\s*$" | tail -${TAIL:-60}
echo "== end $(date +%T) ($SECONDS s)"
kill $watch; pkill -f "agent.cli bench" 2>/dev/null
tar -czf "$out/bench.tgz" -C "$(dirname "$bench")" "$(basename "$bench")"
tar -czf "$out/seeds.tgz" -C "$(dirname "$cache")" "$(basename "$cache")"
