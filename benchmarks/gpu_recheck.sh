#!/usr/bin/env bash
# Re-checks on the GPU of fixes made on the CPU, in one run on any GPU machine:
#   bash benchmarks/gpu_recheck.sh OUT [BUDGET_S]
# 1) KernelBench level-1 problems whose seeds changed (RESEED, a regex; default the
#    depthwise convolutions seeded as sums over taps, 46 and 82-86, and the
#    Grid2DWithYZOverflow launches, 72 and 97): seeded afresh (empty seed cache) and judged,
#    seed alone, through benchmarks/kb_level1_gpu.sh into OUT/re/ (the same settings as the
#    level-1 table in BENCHMARKS.md);
# 2) the gate problem's standalone `krefine eval` before/after (BEFORE, default .before: an
#    older checkout's agent/ and tools/), PAIRS times, the order alternating (the first of
#    a pair pays the on-disk caches both share), into OUT/gate.json.
# Needs .kb/level1 (and BEFORE); without network, copy .whl too and install its wheels
# first (see kb_gpu_session.sh).
set -u
out=${1:?out}; budget=${2:-560}
export PYTHONPATH=$PWD:/tmp/site:${PYTHONPATH:-} PYTHONUNBUFFERED=1
mkdir -p "$out/re"
reseed=${RESEED:-^(46|72|8[2-6]|97)_}
seeds=$(mktemp -d /tmp/reseeds.XXXX)
before=${BEFORE:-.before}
gate_s=0; [ -d "$before" ] && gate_s=$(( ${PAIRS:-3} * 70 ))   # the time the gate pairs keep
echo "== reseed $reseed $(date +%T)"
BENCH_DIR=/tmp/kbre FULL_FILTER="$reseed" SEED_S=${SEED_S:-300} SWEEP_BELOW=0 TAIL=30 \
  bash benchmarks/kb_level1_gpu.sh "$out/re" "${LEVEL:-.kb/level1}" "$seeds" $(( budget - gate_s - SECONDS ))
rm -f "$out/re/seeds.tgz"
if [ -d "$before" ]; then
  pairs=$(mktemp -d /tmp/gate.XXXX)   # this run's pairs only
  for i in $(seq 1 "${PAIRS:-3}"); do
    [ $(( budget - SECONDS )) -lt 70 ] && { echo "== gate: out of time after $((i - 1)) pairs"; break; }
    flag=; [ $((i % 2)) = 0 ] && flag=--before-first
    echo "== gate pair $i $flag $(date +%T) ($SECONDS s)"
    python3 benchmarks/judge_throughput.py --stages standalone --only gate --before "$before" $flag \
      --out "$pairs/gate$i.json" 2>&1 | grep "standalone"
  done
  ls "$pairs"/gate*.json >/dev/null 2>&1 && python3 - "$out/gate.json" "$pairs"/gate*.json <<'PY'
import json, sys
pairs = [json.load(open(p))["cases"]["gate"] for p in sys.argv[2:]]
json.dump(pairs, open(sys.argv[1], "w"), indent=1)
for i, r in enumerate(pairs, 1):
    a, b = r["standalone"]["correct"], r.get("before", {}).get("correct", {})
    print(f"gate pair {i}: after {a.get('wall_s')} s ({a.get('verdict')}), before {b.get('wall_s')} s ({b.get('verdict')})")
PY
fi
echo "== recheck done ($SECONDS s)"
