#!/bin/bash
# Ray for a GPU machine without network access, in ONE transfer where each transfer is
# size-limited: Ray's wheel (79 MB) unpacked without what `krefine bench --ray local`
# never loads — the Java jar (34 MB), the dashboard's web build (local starts with
# include_dashboard=False), RLlib and source maps — and packed with xz: ~30 MB, small
# enough to copy beside .whl (18 MB) and .kb in one go. (benchmarks/device_bigwheels.sh
# would split the whole wheel into two parts, to be staged one after the other on the
# same machine.) tests/test_ray_bench.py passes against a Ray trimmed the same way.
#
# On a machine with network access (repo root; PyPI reachable), once:
#   bash benchmarks/device_ray_slim.sh            -> .raywheel/ray-slim.tar.xz (git-ignored)
# On the GPU machine, with .whl and .raywheel copied into the checkout:
#   bash benchmarks/device_ray_slim.sh install     -> Ray in ${SITE:-/tmp/site}
# (Ray's jsonschema family comes in .whl/extra: benchmarks/device_bigwheels.sh download.)
set -euo pipefail
VERSION=${RAY_VERSION:-2.60.0}
OUT=.raywheel/ray-slim.tar.xz
case "${1:-download}" in
download)
  root=$(git rev-parse --show-toplevel); cd "$root"
  exclude=$(git rev-parse --git-path info/exclude)
  grep -qx "/.raywheel/" "$exclude" 2>/dev/null || echo "/.raywheel/" >> "$exclude"
  tmp=$(mktemp -d)
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux2014_x86_64 -d "$tmp" "ray==$VERSION"
  # unpacked with the files' modes (`python -m zipfile -e` drops them: on 2026-11-26 Ray's
  # gcs_server came out not executable and `--ray local` stopped with EACCES on the H200s)
  mkdir "$tmp/x" && python3 - "$tmp"/ray-*.whl "$tmp/x" <<'PY'
import os, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for info in z.infolist():
        path = z.extract(info, sys.argv[2])
        mode = (info.external_attr >> 16) & 0o777
        if mode and not info.is_dir():
            os.chmod(path, mode)
PY
  rm -rf "$tmp/x/ray/jars" "$tmp/x/ray/dashboard/client/build" "$tmp/x/ray/rllib"
  find "$tmp/x" -name "*.map" -delete
  mkdir -p .raywheel
  tar -cf - -C "$tmp/x" . | xz -T0 -6 > "$OUT"
  rm -rf "$tmp"
  ls -la "$OUT"
  ;;
install)
  [ -f "$OUT" ] || { echo "device_ray_slim: copy .raywheel to this machine (made on a machine with network by: bash $0)" >&2; exit 1; }
  mkdir -p "${SITE:-/tmp/site}"
  tar -xJf "$OUT" -C "${SITE:-/tmp/site}"
  [ -x "${SITE:-/tmp/site}/ray/core/src/ray/gcs/gcs_server" ] \
    || { echo "device_ray_slim: Ray's gcs_server is not executable: remake $OUT here" >&2; exit 1; }
  PYTHONPATH=${SITE:-/tmp/site} python3 -c "import ray; print('ray', ray.__version__)"
  ;;
*)
  echo "usage: $0 [download|install]" >&2; exit 2
  ;;
esac
