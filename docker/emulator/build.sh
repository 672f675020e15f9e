#!/usr/bin/env bash
# Build the emulator image offline (wheelhouse on the host, pip --no-index and network=none in
# the build). Needs the local base image: bash docker/base/build.sh. Prints the tag.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
py="${PYTHON:-$root/.venv/bin/python}"
cd "$root"
exec "$py" -m bench.emulator.image --tag "${EMULATOR_IMAGE_TAG:-specbench/emulator:dev}" \
  --base-image "${BASE_IMAGE:-specbench/base:bookworm}" "$@"
