#!/usr/bin/env bash
# The GPU tiny experiment (bench/experiments/tiny-vllm-gpu.yaml) on the lent H200, end to end:
# vLLM 0.26.0 from PyPI, unpacked on a device machine that has torch 2.11.0+cu130 and no network,
# `specbench matrix --launcher process --local-engine`, `specbench report`, and the result
# brought back. docs/gpu-tiny-example/ holds the reports it made and the device minutes used.
#
# Steps (prepare and unpack run here; stage and run run on the device machine, through the
# workplace's device tool, each as `bash .gpu/sh/gpu_tiny.sh <step>` with the carry named):
#   1. scripts/gpu_tiny.sh prepare            here: .gpu/{c1,c2,whl,tiny,proj,sh} (git-ignored)
#   2. stage          carry [.gpu/c1, .gpu/sh]:                 C.tar.xz into ~/vllm (~2 min)
#   3. run tiny-vllm-gpu 1   carry [.gpu/c2, .gpu/whl, .gpu/tiny, .gpu/proj, .gpu/sh]:
#                     install, then the first configurations             (4.3 min)
#   4. run tiny-vllm-gpu 2   same carry: the rest (--resume), the recorder, the report (3.3 min)
#   5. run tiny-vllm-gpu-dflash all, run tiny-vllm-gpu-mtp all   same carry: DFlash, MTP
#   6. scripts/gpu_tiny.sh unpack FILES_AT    here: the tarballs from $OUT into /tmp/gpu-tiny
# Calls 2-5 must follow each other within the machine's 30 s warm window: ~ is lost after it.
# Nothing fetched is committed: prepare downloads the pinned wheels with pip every time.
set -euo pipefail

VLLM_VERSION=0.26.0 # the last vLLM pinned to torch==2.11.0, the device image's torch
VLLM_WHEEL=vllm-${VLLM_VERSION}-cp38-abi3-manylinux_2_28_x86_64.whl
# What vLLM's server imports and the device image lacks (cp312 manylinux wheels). openai < 3
# (3.x needs httpx2), xgrammar <= 0.2.7 (0.2.8 needs a newer apache-tvm-ffi than vLLM's pin),
# llguidance < 1.8 (vLLM's pin). Found by importing the server in a CPU venv, then on the GPU.
DEPS=(annotated_types==0.8.0 apache_tvm_ffi==0.1.10 blake3==1.0.11 cachetools==8.0.2
  cbor2==6.3.0 distro==1.9.0 fastapi==0.136.3 jiter==0.19.0 jmespath==1.1.0 llguidance==1.7.6
  model_hosting_container_standards==0.1.16 msgspec==0.23.0 openai==2.54.0 openai_harmony==0.0.8
  partial_json_parser==0.2.1.1.post7 prometheus_fastapi_instrumentator==8.1.0 pybase64==1.5.1
  pydantic==2.14.4 pydantic_core==2.50.5 python_multipart==0.0.34 pyzmq==27.3.0
  setproctitle==1.3.8 sniffio==1.3.1 starlette==1.10.0 typing_inspection==0.4.5 uvicorn==0.55.0
  watchfiles==1.3.0 xgrammar==0.2.7
  compressed_tensors==0.17.0 loguru==0.7.3) # the last two: Qwen3-Next (MTP) imports fused_moe
# Left out of the wheel, each checked in its source: FA2 (imported in a try; SM90 takes FA3),
# the MoE ops (contextlib.suppress(ImportError); the tiny model is dense), the Rust frontend
# (VLLM_USE_RUST_FRONTEND only), DeepGEMM's builds for other CPython versions.
EXCLUDE=(vllm/_C_stable_libtorch.abi3.so vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so
  vllm/_moe_C_stable_libtorch.abi3.so vllm/vllm-rs 'vllm/third_party/deep_gemm/_C.cpython-310-*'
  'vllm/third_party/deep_gemm/_C.cpython-311-*' 'vllm/third_party/deep_gemm/_C.cpython-313-*'
  'vllm/third_party/deep_gemm/_C.cpython-314-*')
ART=~/art     # the matrices' artifacts on the device machine, one folder per experiment
ONLY1=(baseline self-draft partial-draft)

prepare() {
  # run here, in the checkout the device tool sends (its root), with the worktree to carry
  local src=${1:?usage: prepare WORKTREE} root
  root=$(pwd)
  grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo /.gpu/ >>.git/info/exclude
  mkdir -p .gpu/dl .gpu/c1 .gpu/c2 .gpu/whl .gpu/sh
  [ -f .gpu/dl/$VLLM_WHEEL ] || python3 -m pip download -q --no-deps --only-binary=:all: \
    --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 \
    -d .gpu/dl vllm==$VLLM_VERSION
  rm -rf .gpu/dl/x && mkdir .gpu/dl/x && (cd .gpu/dl/x && unzip -q ../$VLLM_WHEEL)
  (cd .gpu/dl/x && tar cf - vllm/_C_stable_libtorch.abi3.so | xz -9 -T2 >"$root/.gpu/c1/C.tar.xz")
  local ex=() e
  for e in "${EXCLUDE[@]}"; do ex+=("--exclude=$e"); done
  (cd .gpu/dl/x && tar cf - "${ex[@]}" vllm vllm-$VLLM_VERSION.dist-info | xz -9 -T2 \
    >"$root/.gpu/c2/B.tar.xz")
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux_2_24_x86_64 \
    --platform manylinux_2_31_x86_64 --platform manylinux_2_34_x86_64 \
    --platform manylinux_2_35_x86_64 --platform manylinux1_x86_64 -d .gpu/whl "${DEPS[@]}"
  rm -rf .gpu/tiny .gpu/proj && "$src/.venv/bin/specbench" tiny-model .gpu/tiny
  mkdir -p .gpu/proj
  (cd "$src" && tar cf - bench reports/templates reports/reference pyproject.toml \
    tests/gpu/record_vllm_gpu.py) |
    (cd .gpu/proj && tar xf -)
  cp "$src/scripts/gpu_tiny.sh" .gpu/sh/
  du -sh .gpu/c1 .gpu/c2 .gpu/whl .gpu/tiny .gpu/proj .gpu/sh
}

device_env() {
  export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
  export NVSHMEM_DISABLE_NVLS=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1
  export DO_NOT_TRACK=1
  # flashinfer is not carried: vllm/v1/sample/ops/topk_topp_sampler.py:44 imports it unless
  export VLLM_USE_FLASHINFER_SAMPLER=0
  export PYTHONPATH=$HOME/vllm:$HOME/site PATH=$HOME/bin:$PATH
}

stage() {
  mkdir -p ~/stash ~/vllm
  cp .gpu/c1/C.tar.xz ~/stash/ && tar xJf ~/stash/C.tar.xz -C ~/vllm
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c 'import torch, sys; print(sys.version.split()[0], torch.__version__, torch.cuda.get_device_name())'
}

install() {
  [ -f ~/vllm/vllm/_C_stable_libtorch.abi3.so ] || { echo "stage first (C.tar.xz)"; exit 3; }
  if [ ! -f ~/site/.installed ]; then
    tar xJf .gpu/c2/B.tar.xz -C ~/vllm
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target ~/site .gpu/whl/*.whl
    touch ~/site/.installed
  fi
  # `vllm serve MODEL ...` (the argv specbench builds) through the API server module: the
  # unpacked wheel has no console script, and vllm.entrypoints.cli.main imports the
  # benchmark subcommands (more packages). api_server's own parser takes --model.
  mkdir -p ~/bin
  cat >~/bin/vllm <<'EOF'
#!/bin/sh
[ "$1" = serve ] || { echo "shim: only 'vllm serve' is provided" >&2; exit 2; }
shift; model=$1; shift
exec python3 -m vllm.entrypoints.openai.api_server --model "$model" "$@"
EOF
  chmod +x ~/bin/vllm
  rm -rf /models && ln -s "$(pwd)/.gpu/tiny" /models
}

matrix() { # matrix EXPERIMENT [--only NAME ...]
  local exp=$1
  shift
  (cd .gpu/proj && timeout "${BUDGET_S:-500}" python3 -m bench matrix \
    "bench/experiments/$exp.yaml" --out "$ART/$exp" --launcher process --local-engine \
    --allow-unpinned --model-cache /models --no-progress --resume "$@") || true
}

collect() {
  # $OUT: at most 8 files, 2 folders deep; tar the artifacts, keep the console log readable
  mkdir -p "$OUT"
  tar czf "$OUT/art.tgz" -C ~ art
  if [ -d ~/report ]; then tar czf "$OUT/report.tgz" -C ~ report; fi
  if [ -d ~/rec ]; then tar czf "$OUT/rec.tgz" -C ~ rec; fi
  cp ~/console.log "$OUT/" 2>/dev/null || true
}

run() { # run EXPERIMENT PART: PART 1 = the first configurations only, 2 = the rest, the
  #       recorder and the report, all = every configuration and the report
  local exp=${1:?experiment} part=${2:-all} only=() t0=$SECONDS
  device_env
  install 2>&1 | tee -a ~/console.log
  echo "install: $((SECONDS - t0)) s" | tee -a ~/console.log
  if [ -n "${ONLY:-}" ]; then # ONLY="a b": just these configurations
    for c in $ONLY; do only+=(--only "$c"); done
  elif [ "$part" = 1 ]; then
    for c in "${ONLY1[@]}"; do only+=(--only "$c"); done
  fi
  matrix "$exp" "${only[@]}" 2>&1 | tee -a ~/console.log
  if [ "$part" = 2 ]; then
    (cd .gpu/proj && timeout 300 python3 tests/gpu/record_vllm_gpu.py --out ~/rec) 2>&1 |
      tee -a ~/console.log || true
  fi
  if [ "$part" != 1 ]; then
    (cd .gpu/proj && python3 -m bench report "$ART/$exp" --out ~/report/"$exp") 2>&1 |
      tee -a ~/console.log || true
  fi
  nvidia-smi >>~/console.log 2>&1 || true
  echo "$exp part $part: $((SECONDS - t0)) s" | tee -a ~/console.log
  collect
}

unpack() {
  local at=${1:?usage: unpack FILES_AT} to=/tmp/gpu-tiny
  mkdir -p $to
  for f in "$at"/*.tgz; do tar xzf "$f" -C $to; done
  ls $to
}

case "${1:-}" in
prepare) prepare "${2:-}" ;;
stage) stage ;;
run) run "${2:-}" "${3:-}" ;;
unpack) unpack "${2:-}" ;;
*) sed -n '2,18p' "$0" && exit 2 ;;
esac
