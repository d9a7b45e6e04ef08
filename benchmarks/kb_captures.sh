#!/usr/bin/env bash
# Inductor captures of KernelBench problems on the GPU, for seed coverage work on CPU:
#   bash benchmarks/kb_captures.sh OUT_DIR LEVEL_DIR [JOBS] [BUDGET_S]
# Per problem (JOBS at once, default 4): the default capture, its conversion, and when the
# conversion fails, a capture with Inductor's Triton templates (max-autotune; GEMMs and
# convolutions) and its conversion. Writes OUT_DIR/captures/NAME.{default,templates}.py and
# OUT_DIR/capture_log.tsv (problem, mode, exit, seconds, last line of stderr). A problem whose
# log already has a line is skipped, so a second run goes on where the first was cut off.
set -u
out=${1:?out dir}; L=${2:?level dir}; jobs=${3:-4}; budget=${4:-540}
mkdir -p "$out/captures"; log=$out/capture_log.tsv; touch "$log"
export PYTHONPATH=$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1 OUTDIR=$out
one() {
  p=$1; n=$(basename "$p" .py); c=$OUTDIR/captures
  grep -qE "^$n	(templates	|default	0	)" "$OUTDIR/capture_log.tsv" && return 0
  for mode in default templates; do
    t0=$SECONDS; flag=; [ $mode = templates ] && flag=--templates
    timeout 300 python3 -m tools.dialect capture "$p" --device "${DEVICE:-cuda}" --out "$c/$n.$mode.py" $flag > "$c/$n.$mode.err" 2>&1
    rc=$?
    if [ $rc = 0 ]; then
      timeout 60 python3 -m tools.dialect convert "$p" "$c/$n.$mode.py" --out "$c/$n.$mode.seed.py" > "$c/$n.$mode.conv" 2>&1
      rc=$((rc + $?)); why=$(tail -1 "$c/$n.$mode.conv")
      # a seed left calling a library kernel (extern_kernels.mm) is one the guards reject
      if [ $rc = 0 ] && grep -q "extern_kernels\." "$c/$n.$mode.seed.py"; then rc=9; why="the seed calls extern_kernels"; fi
    else
      why=$(grep -v '^\s*$' "$c/$n.$mode.err" | tail -1)
    fi
    printf '%s\t%s\t%s\t%s\t%s\n' "$n" "$mode" "$rc" "$((SECONDS - t0))" "$(echo "$why" | tr '\t' ' ' | cut -c1-200)" >> "$OUTDIR/capture_log.tsv"
    echo "$n $mode rc=$rc $((SECONDS - t0))s $(echo "$why" | cut -c1-120)"
    [ $rc = 0 ] && break
  done
}
export -f one
ls "$L"/*.py | sort -V | timeout "$budget" xargs -P "$jobs" -I{} bash -c 'one {}'
pkill -f "tools.dialect (capture|convert)" 2>/dev/null   # what the cut-off left running
awk -F'\t' '{k[$1]=$3} END {for (p in k) {n++; if (k[p] == 0) ok++}; print "converted", ok "/" n}' "$log"
