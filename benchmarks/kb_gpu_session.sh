#!/usr/bin/env bash
# KernelBench level 1 and the 1- vs 2-GPU scaling on a machine with 2 GPUs, in runs of
# BUDGET_S seconds each (under `timeout` or a job scheduler's limit); each run does what
# is next:
#   bash benchmarks/kb_gpu_session.sh OUT [BUDGET_S]
# 1) the Inductor seeds of every level-1 problem into SEEDS (the scaling subset first);
# 2) benchmarks/gpu_scaling.py on SUBSET (20 problems) with --gpus 1, --gpus 2 and
#    --ray local (2 judge actors; only once Ray is installed), each stage started only if
#    its estimate fits the time left (a stage cut short would not measure anything);
# 3) every level-1 problem (benchmarks/kb_level1_gpu.sh; seed alone, then the
#    sweep where the seed trails torch.compile). The 2-GPU scaling stage ran the subset with
#    the very same settings, so its run directories are the level-1 bench's for those 20.
# All state lives in /tmp (SEEDS, /tmp/kbscale, /tmp/kbbench): run the next step on the same
# machine, or untar the previous run's tars into /tmp first. Everything is also written to
# OUT as tars at the end of each run (untar them into /tmp to go on from another machine).
# Set-up before it, on a GPU machine without network access (with .whl, .raywheel, .kb
# copied into the checkout; where pip works, install krefine and Ray normally):
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl .whl/extra/*.whl
#   bash benchmarks/device_ray_slim.sh install          (Ray, ~30 MB, for the ray stage)
# and KernelBench level 1 in LEVEL (.kb/level1). LEVEL1=0: the subset's seeds and STAGES only.
set -u
out=${1:?out}; budget=${2:-560}
L=${LEVEL:-.kb/level1}; seeds=${SEEDS:-/tmp/seeds}
subset=${SUBSET:-^(19|2[0-9]|3[0-8])_}
export PYTHONPATH=$PWD:/tmp/site:${PYTHONPATH:-} PYTHONUNBUFFERED=1 KREFINE_KEEP_JUDGE_S=0
mkdir -p "$out" "$seeds"
left() { echo $((budget - SECONDS)); }
# the settings of every bench below: the same for the scaling stages and the level-1 pass
sets=(--set search.seed_timeout_s=${SEED_S:-400} --set search.sweep_budget=3 --set bench.seed_jobs=${SEED_JOBS:-4})
common=(--model none --set search.seed_kernel=inductor --set "search.seed_cache=$seeds" "${sets[@]}"
        --config benchmarks/kb_memory.toml --device cuda)

if [ ! -f /tmp/kbsession.seeds ]; then
  for f in "$subset" $([ "${LEVEL1:-1}" != 0 ] && echo .); do   # LEVEL1=0: the subset's seeds only
    echo "== seeds ($f) $(date +%T) ($SECONDS s)"
    timeout $(( $(left) - 20 )) python3 -m agent.cli bench "$L" --seeds-only --gpus 2 --filter "$f" "${common[@]}" \
      --out /tmp/kbseedsonly 2>&1 | grep -v "^\s*$" | tail -40
  done
  [ "$(left)" -gt 20 ] && touch /tmp/kbsession.seeds
fi

python3 -c "import ray" 2>/dev/null && have_ray=1 || have_ray=0
for stage in ${STAGES:-g1 g2 ray}; do   # STAGES: a subset (g1 was measured on 2026-11-25)
  grep -q "\"$stage\"" /tmp/kbscale/scaling.json 2>/dev/null && continue
  need=$(case $stage in g1) echo ${G1_S:-240};; g2) echo ${G2_S:-140};; ray) echo ${RAY_S:-170};; esac)
  [ "$stage" = ray ] && [ $have_ray = 0 ] && { echo "== ray: not installed yet"; continue; }
  [ "$(left)" -lt "$need" ] && { echo "== $stage: needs ~$need s, $(left) s left: next call"; break; }
  echo "== scaling $stage $(date +%T) ($SECONDS s)"
  python3 benchmarks/gpu_scaling.py "$L" --filter "$subset" --seed-cache "$seeds" --out /tmp/kbscale \
    --bench-dir /tmp/kbscale --stages $stage --timeout-s $(( $(left) - 10 )) \
    $(for s in "${sets[@]}"; do [ "$s" = --set ] || echo --set "$s"; done) --set search.sweep_variants=0 2>&1 | tail -15
done

# the level-1 pass reuses the 2-GPU stage's runs (same settings, seed alone)
lv=/tmp/kbbench/search.sweep_variants=0
if [ -d /tmp/kbscale/g2/default ] && [ ! -f /tmp/kbsession.reused ]; then
  mkdir -p "$lv"
  for d in /tmp/kbscale/g2/default/*/; do   # over any interrupted run of the same problem here
    rm -rf "$lv/$(basename "$d")" && cp -r "$d" "$lv/"
  done
  touch /tmp/kbsession.reused
fi
if [ "${LEVEL1:-1}" != 0 ] && [ "$(left)" -gt 60 ]; then   # LEVEL1=0: the scaling stages only
  # its own limit 45 s before ours: a bench stopped by SIGTERM takes up to ~30 s to unwind
  BENCH_DIR=/tmp/kbbench TAIL=110 bash benchmarks/kb_level1_gpu.sh "$out" "$L" "$seeds" $(( $(left) - 45 ))
fi
tar -czf "$out/kbscale.tgz" -C /tmp kbscale 2>/dev/null
[ -f "$out/seeds.tgz" ] || tar -czf "$out/seeds.tgz" -C "$(dirname "$seeds")" "$(basename "$seeds")"
[ -f "$out/bench.tgz" ] || tar -czf "$out/bench.tgz" -C /tmp kbbench 2>/dev/null
cp /tmp/kbscale/scaling.json "$out/" 2>/dev/null
echo "== session step done ($SECONDS s)"
