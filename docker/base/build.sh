#!/usr/bin/env bash
# Build the local base image (Debian bookworm minbase + Python 3.11) with debootstrap and
# `docker import`, because no container registry is reachable here. Idempotent: an existing
# image with the same tag is kept unless FORCE=1.
set -euo pipefail

tag="${BASE_IMAGE_TAG:-specbench/base:bookworm}"
# One build at a time per machine: CI builds in the background while tests that need the image
# call this script too; they wait here, then find the image present.
exec 9>"/tmp/specbench-base-image.lock"
flock 9
if [[ "${FORCE:-0}" != "1" ]] && docker image inspect "$tag" >/dev/null 2>&1; then
  echo "base image $tag already present"
  exit 0
fi

mirror="${DEBIAN_MIRROR:-}"
if [[ -z "$mirror" ]]; then
  # The machine's own Debian mirror: first URIs line of the deb822 sources, else sources.list.
  mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  [[ -n "$mirror" ]] || mirror=$(awk '/^deb / {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
  [[ -n "$mirror" ]] || mirror="http://deb.debian.org/debian"
fi

root=$(mktemp -d /tmp/specbench-base.XXXXXX)
trap 'rm -rf "$root"' EXIT
echo "debootstrap bookworm from $mirror into $root"
debootstrap --variant=minbase \
  --include=python3,python3-venv,python3-pip,ca-certificates,tini \
  bookworm "$root" "$mirror" >/dev/null
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
tar -C "$root" -c . | docker import \
  --change 'ENV LANG=C.UTF-8' \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD ["/bin/bash"]' \
  - "$tag" >/dev/null
echo "built $tag"
