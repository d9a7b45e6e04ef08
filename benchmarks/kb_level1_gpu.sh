#!/usr/bin/env bash
# KernelBench level 1 through `krefine bench` (Inductor seed + constant sweep, no model),
# on every GPU of the machine, in one run of BUDGET_S seconds:
#   bash benchmarks/kb_level1_gpu.sh OUT LEVEL_DIR SEED_CACHE [BUDGET_S]
# The bench compiles the seeds it lacks first ([bench] seed_jobs per GPU, into SEED_CACHE:
# bring it along, see benchmarks/kb_seed_cache.py to fill it from captures), then
# B) the sweep pass: SWEEP_FILTER's problems (a regex) with search.sweep_variants=0 and =3;
# C) every problem (or FULL_FILTER's, a regex: e.g. "^(?!(19|20)_)" leaves out those that
#    benchmarks/gpu_scaling.py judged) with search.sweep_variants=${FULL_SWEEP:-0} (0: the
#    seed alone; B's runs are reused), `--gpus` all of them, until BUDGET_S (default 560)
#    seconds after the start. SEED_JOBS (default 4) seeds compile at once per GPU.
# D) then the sweep (3 variants) on the problems whose seed trails torch.compile (kb_slow_seeds.py).
# The bench directory (BENCH_DIR, default /tmp/kbbench; resumable: untar OUT/bench.tgz there,
# on this or another machine, and run again), the seed cache and the nvidia-smi log of which process
# held memory on which GPU go to OUT. DEVICE=cpu runs it on the CPU (a smoke test).
set -u
out=${1:?out}; L=${2:?level dir}; cache=${3:?seed cache}; budget=${4:-560}
export PYTHONPATH=$PWD:/tmp/site:${PYTHONPATH:-} PYTHONUNBUFFERED=1 KREFINE_KEEP_JUDGE_S=0
bench=${BENCH_DIR:-/tmp/kbbench}; mkdir -p "$bench" "$out"
dev=${DEVICE:-cuda}
ngpu=$({ nvidia-smi -L 2>/dev/null || echo cpu; } | tee "$out/gpus.txt" | wc -l)
gpus=(--gpus "$ngpu"); [ "$dev" = cpu ] && gpus=()
# the bench directory and the seed cache go to OUT every SNAP_S (60) seconds as well as at the
# end: a run cut off (by `timeout`, SIGTERM) still leaves what is under OUT
snap() { tar -czf "$out/.bench.tmp" -C "$(dirname "$bench")" "$(basename "$bench")" 2>/dev/null \
           && mv "$out/.bench.tmp" "$out/bench.tgz"
         tar -czf "$out/.seeds.tmp" -C "$(dirname "$cache")" "$(basename "$cache")" 2>/dev/null \
           && mv "$out/.seeds.tmp" "$out/seeds.tgz"; }
(while sleep "${SNAP_S:-60}"; do snap; done) & snapper=$!
(while true; do ts=$(date +%s)
   nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader 2>/dev/null | sed "s/^/$ts, /" >> "$out/compute_apps.csv"
   sleep 5; done) & watch=$!
common=(--model none --set search.seed_kernel=inductor --set "search.seed_cache=$cache" --set search.seed_timeout_s=${SEED_S:-400}
        --set search.sweep_budget=3 --set bench.seed_jobs=${SEED_JOBS:-4} --config benchmarks/kb_memory.toml --device "$dev" "${gpus[@]}"
        --out "$bench")
if [ -n "${SWEEP_FILTER:-}" ]; then
  echo "== B: sweep $(date +%T) ($SECONDS s)"
  timeout -k 20 $((budget - SECONDS)) python3 -m agent.cli bench "$L" "${common[@]}" --filter "$SWEEP_FILTER" \
    --sweep search.sweep_variants=0,3 2>&1 | grep -v "^\s*$" | tail -25
fi
echo "== C: level $(date +%T) ($SECONDS s)"
timeout -k 20 $((budget - SECONDS)) python3 -m agent.cli bench "$L" "${common[@]}" --filter "${FULL_FILTER:-.}" \
  --sweep search.sweep_variants=${FULL_SWEEP:-0} 2>&1 \
  | grep -v "^\s*$" | tail -${TAIL:-80}
# D) the sweep where it can matter: the problems whose correct seed is at most SWEEP_BELOW (0.9)
#    times torch.compile's speed in C, at most SWEEP_MAX (16), with search.sweep_variants=3
slow=$(python3 benchmarks/kb_slow_seeds.py "$bench" --setting "search.sweep_variants=${FULL_SWEEP:-0}" \
       --below "${SWEEP_BELOW:-0.9}" --max "${SWEEP_MAX:-16}" 2>/dev/null)
if [ -n "$slow" ] && [ $((budget - SECONDS)) -gt 60 ]; then
  echo "== D: sweep where the seed trails torch.compile: $slow $(date +%T) ($SECONDS s)"
  timeout -k 20 $((budget - SECONDS)) python3 -m agent.cli bench "$L" "${common[@]}" --filter "$slow" \
    --sweep search.sweep_variants=0,3 2>&1 | grep -v "^\s*$" | tail -40
fi
echo "== end $(date +%T) ($SECONDS s)"
kill $watch $snapper; pkill -f "agent.cli bench" 2>/dev/null
snap
