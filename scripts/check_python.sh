#!/bin/sh
# make setup's first step: the Pythons it is about to use (the Makefile's PY and VENV_PY) can do
# it. VENV_PY is what uv builds .venv with: an interpreter (PY by default), or a version such as
# 3.12 that uv downloads when no such Python is installed; either way >= 3.11 (pyproject.toml's
# requires-python). PY bootstraps uv into .tools/ with `python -m venv`, so it must run and have
# its venv module (ensurepip: python3.X-venv on Debian/Ubuntu); for setup-pip, PY is the venv's
# Python. Stock Ubuntu 22.04 has Python 3.10, without venv. Exits 2 with what to install.
#
# usage: check_python.sh PY VENV_PY MODE
#   MODE boot: the uv bootstrap (PY with venv, and VENV_PY); sync: VENV_PY only (uv makes the
#   venv itself); pip: setup-pip (PY with venv, >= 3.11)
set -u
py=$1
venv_py=$2
mode=${3:-boot}
min_major=3
min_minor=11

help() {
    cat >&2 <<EOF
  Stock Ubuntu 22.04 has Python 3.10. Either let uv download a Python for the venv (python-build-
  standalone, from GitHub), with your Python 3 only bootstrapping uv:
      sudo apt install python3-venv && make setup VENV_PY=3.12
  or install a Python 3.11 with venv and use it (jammy's python3.11 is 3.11.0~rc1, a release
  candidate; deadsnakes' PPA has a final 3.11):
      sudo apt install python3.11 python3.11-venv && make setup PY=python3.11
  Ubuntu 24.04 and Debian 12: sudo apt install python3-venv
EOF
}

# version of an interpreter, "" when it does not run; VENV_OK=1 when it has ensurepip
probe() {
    VERSION=$("$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null) || VERSION=""
    VENV_OK=0
    if [ -n "$VERSION" ] && "$1" -c 'import ensurepip, venv' >/dev/null 2>&1; then VENV_OK=1; fi
}

new_enough() {  # "3.12" -> true when >= min
    major=${1%%.*}
    minor=${1#*.}
    minor=${minor%%.*}
    case "$major$minor" in *[!0-9]*|"") return 1 ;; esac
    [ "$major" -gt "$min_major" ] || { [ "$major" -eq "$min_major" ] && [ "$minor" -ge "$min_minor" ]; }
}

if [ "$mode" != sync ]; then
    probe "$py"
    if [ -z "$VERSION" ]; then
        echo "make: PY=$py does not run a Python ('$py -c ...' failed); make setup needs one." >&2
        help
        exit 2
    fi
    if { [ "$mode" = pip ] || [ "$venv_py" = "$py" ]; } && ! new_enough "$VERSION"; then
        echo "make: $py is Python $VERSION; make setup needs Python >= $min_major.$min_minor for the venv." >&2
        help
        exit 2
    fi
    if [ "$VENV_OK" != 1 ]; then
        echo "make: $py (Python $VERSION) has no venv module (ensurepip); make setup needs it." >&2
        echo "  Debian/Ubuntu: sudo apt install python$VERSION-venv" >&2
        exit 2
    fi
    if [ "$mode" = pip ]; then
        exit 0
    fi
fi
# VENV_PY (PY unless given): an interpreter, else a version request that uv resolves (downloads)
probe "$venv_py"
if [ -n "$VERSION" ]; then
    if ! new_enough "$VERSION"; then
        echo "make: $venv_py is Python $VERSION; make setup needs Python >= $min_major.$min_minor for the venv." >&2
        help
        exit 2
    fi
    exit 0
fi
request=${venv_py#cpython-}
request=${request#cpython}
if new_enough "$request"; then
    exit 0  # uv finds or downloads it
fi
echo "make: VENV_PY=$venv_py is neither a Python on PATH nor a version >= $min_major.$min_minor for uv to fetch." >&2
help
exit 2
