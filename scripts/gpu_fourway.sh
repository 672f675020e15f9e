#!/usr/bin/env bash
# The seed's four-way on real engines (issue 49): bench/experiments/tiny-fourway-gpu.yaml, vLLM
# 0.26.0 and SGLang 0.5.17 on one lent H100/H200, one run folder (~/art/tiny-fourway-gpu on the
# device) resumed across calls, one carry per engine. Also the SGLang determinism experiment
# (tiny-sglang-gpu-determinism.yaml), and SGLang's GPTQ Marlin GEMM built in the background
# while the other calls run (6 min of nvcc at the first forward otherwise).
#
# Here:    scripts/gpu_fourway.sh prepare        every carry (.gpu-sgl, .gpu, .gpu-4w; ignored)
#          scripts/gpu_fourway.sh source         after a commit: the source record again
# Device, back to back (a machine goes back ~30 s after a call; ~ survives while it is warm):
#   1. run sgl "install jit determinism"   carry [.gpu-sgl/c/{K,S,D,W}.tar.xz, .gpu-sgl/patch,
#                                          .gpu-4w/det]
#   2. run vllm "stage"                    carry [.gpu/c1]
#   3. run vllm "install fourway"          carry [.gpu/c2, .gpu/whl, .gpu-4w/4w]
#   4. run sgl "install fourway report"    carry [.gpu-4w/4w] (warm; else also those of 1)
# each as `bash scripts/gpu_fourway.sh run ENGINE "STEPS"`; then here:
#   scripts/gpu_fourway.sh unpack FILES_AT  the tarballs into /tmp/gpu-4w; .gpu-4w/4w/art.tgz
#   (the run folder) travels with the next call, so a fresh machine resumes it too.
# Nothing fetched is committed: prepare downloads the pinned wheels with pip.
set -euo pipefail

G4=.gpu-4w
SGL=$HOME/sgl
ART=$HOME/art
EXP=tiny-fourway-gpu
DET=tiny-sglang-gpu-determinism

prepare() {
  grep -qx "/$G4/" .git/info/exclude 2>/dev/null || echo "/$G4/" >>.git/info/exclude
  mkdir -p $G4
  [ -f .gpu-sgl/c/W.tar.xz ] || bash scripts/gpu_sglang.sh prepare
  bash scripts/gpu_sglang.sh prepare-project # the tiny models (M.tar.xz) and the patch, fresh
  [ -f .gpu/c1/C.tar.xz ] || bash scripts/gpu_tiny.sh prepare "$(pwd)"
  # the models each carry needs (the SGLang carry alone is 57 MB of the 64 MiB a call)
  rm -rf $G4/det $G4/4w /tmp/gpu-4w-m && mkdir -p $G4/det $G4/4w /tmp/gpu-4w-m
  tar xJf .gpu-sgl/c/M.tar.xz -C /tmp/gpu-4w-m
  (cd /tmp/gpu-4w-m && tar cf - target draft) | xz -9 >$G4/det/M.tar.xz
  (cd /tmp/gpu-4w-m && tar cf - mtp35-gptq mtp35vl-gptq dflash) | xz -9 >$G4/4w/M.tar.xz
  source_record | tee $G4/det/source.json >$G4/4w/source.json
  cat $G4/4w/source.json
  du -sh .gpu-sgl/c .gpu-sgl/patch .gpu/c1 .gpu/c2 .gpu/whl $G4/*
}

source_record() { # what the device's copy of this tree is (it has no .git)
  local sha dirty=false branch
  sha=$(git rev-parse HEAD)
  branch=$(git rev-parse --abbrev-ref HEAD)
  [ -z "$(git status --porcelain)" ] || dirty=true
  printf '{"sha": "%s", "dirty": %s, "branch": "%s", "via": "%s"}\n' "$sha" "$dirty" \
    "$branch" "specbench-source.json written by scripts/gpu_fourway.sh prepare"
}

env_common() {
  export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
  export NVSHMEM_DISABLE_NVLS=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 DO_NOT_TRACK=1
  export VLLM_NO_USAGE_STATS=1 TVM_FFI_CACHE_DIR=$HOME/jit
}

sgl_env() { # sgl_env TREE: stock or patched
  env_common
  export PYTHONPATH=$SGL/pkgs-$1:$SGL/site
}

vllm_env() {
  env_common
  # flashinfer is not carried: vllm/v1/sample/ops/topk_topp_sampler.py:44 imports it unless
  export VLLM_USE_FLASHINFER_SAMPLER=0
  export PYTHONPATH=$HOME/vllm:$HOME/site PATH=$HOME/bin:$PATH
}

models() { # the tiny models at /models, from whichever carry brought them
  local d
  mkdir -p "$HOME/models"
  for d in $G4/*/; do
    if [ -f "$d/M.tar.xz" ]; then tar xJf "$d/M.tar.xz" -C "$HOME/models"; fi
    if [ -f "$d/source.json" ]; then cp "$d/source.json" .specbench-source.json; fi
    # SGLang's JIT modules an earlier machine built (6 min of nvcc), where this one has none
    if [ ! -d "$HOME/jit" ] && [ -f "$d/jit.tgz" ]; then tar xzf "$d/jit.tgz" -C ~; fi
    # a run folder an earlier call brought back: resumed where this machine has none
    if [ ! -d "$ART/$EXP" ] && [ -f "$d/art.tgz" ]; then mkdir -p "$ART" && tar xzf "$d/art.tgz" -C ~; fi
  done
  rm -rf /models && ln -s "$HOME/models" /models
  ls /models/
}

sgl_install() {
  if [ ! -f "$SGL/.installed" ]; then
    [ -f .gpu-sgl/c/K.tar.xz ] || { echo "no SGLang carry and none installed" && exit 3; }
    mkdir -p "$SGL/pkgs-stock" "$SGL/site"
    tar xJf .gpu-sgl/c/K.tar.xz -C "$SGL/pkgs-stock"
    tar xJf .gpu-sgl/c/S.tar.xz -C "$SGL/pkgs-stock"
    tar xJf .gpu-sgl/c/D.tar.xz -C "$SGL/pkgs-stock"
    tar xJf .gpu-sgl/c/W.tar.xz -C "$SGL/site"
    rm -rf "$SGL/pkgs-patched" && cp -a "$SGL/pkgs-stock" "$SGL/pkgs-patched"
    cp -a .gpu-sgl/patch/tree/. "$SGL/pkgs-patched/" # the files prepare patched here
    touch "$SGL/.installed"
  fi
}

vllm_stage() {
  mkdir -p ~/vllm && tar xJf .gpu/c1/C.tar.xz -C ~/vllm
}

vllm_install() {
  [ -f ~/vllm/vllm/_C_stable_libtorch.abi3.so ] || { echo "stage first (C.tar.xz)" && exit 3; }
  if [ ! -f ~/site/.installed ]; then
    tar xJf .gpu/c2/B.tar.xz -C ~/vllm
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target ~/site .gpu/whl/*.whl
    touch ~/site/.installed
  fi
  # `vllm serve MODEL ...` through the API server module (the unpacked wheel has no console
  # script; vllm.entrypoints.cli.main imports the benchmark subcommands, more packages)
  mkdir -p ~/bin
  cat >~/bin/vllm <<'EOF'
#!/bin/sh
[ "$1" = serve ] || { echo "shim: only 'vllm serve' is provided" >&2; exit 2; }
shift; model=$1; shift
exec python3 -m vllm.entrypoints.openai.api_server --model "$model" "$@"
EOF
  chmod +x ~/bin/vllm
}

left() { echo $((DEADLINE - SECONDS)); }

matrix() { # matrix EXPERIMENT [--only NAME ...]: stops 30 s before the call's budget ends
  local exp=$1
  shift
  if [ "$(left)" -lt 100 ]; then
    echo "skipped $exp $*: $(left) s left"
    return 0
  fi
  (timeout "$(($(left) - 30))" python3 -m bench matrix "bench/experiments/$exp.yaml" \
    --out "$ART/$exp" --launcher process --local-engine --allow-unpinned --model-cache /models \
    --no-progress --resume "$@") || true
}

# -- the steps (run ENGINE "STEP ...") ---------------------------------------------------------

jit() { # SGLang's GPTQ Marlin GEMM and repack, built in a session of their own (setsid): the
  # build goes on after this call returns and the next calls find it in TVM_FFI_CACHE_DIR
  sgl_env patched
  setsid nohup python3 -c '
import time, torch
t = time.time()
from sglang.kernels.ops.quantization.gptq_marlin_repack import _jit_gptq_marlin_repack_module
from sglang.kernels.ops.quantization.gptq_marlin import _jit_gptq_marlin_module
_jit_gptq_marlin_repack_module()
print(f"repack built {time.time() - t:.0f} s", flush=True)
_jit_gptq_marlin_module(torch.bfloat16)
print(f"gptq_marlin bf16 built {time.time() - t:.0f} s", flush=True)
' >~/jit-build.log 2>&1 </dev/null &
  echo "JIT build started (pid $!), log ~/jit-build.log"
}

jitwait() { # before the GPTQ servers: the background build done, or wait for it
  local t0=$SECONDS
  while pgrep -f _jit_gptq_marlin_module >/dev/null && [ "$(left)" -gt 200 ]; do sleep 5; done
  echo "JIT: waited $((SECONDS - t0)) s"
  cat ~/jit-build.log 2>/dev/null || true
  ls -la ~/jit 2>/dev/null | head -20 || true
}

determinism() { # the most telling first: the baseline, STANDALONE, its control, the repeat
  local c
  sgl_env patched
  for c in baseline standalone self-draft baseline-again; do matrix $DET --only $c; done
}

fourway_vllm() { # MTP first: vLLM loading the seed's checkpoint shape is the new fact
  vllm_env
  matrix $EXP --only vllm-mtp
  matrix $EXP --only vllm-baseline
  matrix $EXP --only vllm-dflash
}

fourway_sgl() {
  jitwait
  sgl_env patched
  # the configuration never measured first: a call cut short keeps what is new
  matrix $EXP --only sglang-dflash
  matrix $EXP --only sglang-baseline --only sglang-mtp
  sgl_env stock
  matrix $EXP --only sglang-mtp-stock
}

fourway() { if [ "$ENGINE" = vllm ]; then fourway_vllm; else fourway_sgl; fi; }
install() { if [ "$ENGINE" = vllm ]; then vllm_install; else sgl_install; fi; }
stage() { vllm_stage; }

report() {
  local e
  if [ "$ENGINE" = vllm ]; then vllm_env; else sgl_env patched; fi
  for e in $EXP $DET; do
    if [ -d "$ART/$e" ]; then
      (timeout 90 python3 -m bench report "$ART/$e" --out "$HOME/report/$e") || true
    fi
  done
}

collect() { # $OUT: at most 8 files; the run folders, the reports, the logs
  mkdir -p "$OUT"
  if [ -d "$ART" ]; then tar czf "$OUT/art.tgz" -C ~ art; fi
  if [ -d ~/report ]; then tar czf "$OUT/report.tgz" -C ~ report; fi
  # the JIT modules, once built (no build running): a later machine carries them (unpack)
  if [ -d ~/jit ] && ! pgrep -f _jit_gptq_marlin_module >/dev/null; then
    tar czf "$OUT/jit.tgz" -C ~ jit
  fi
  cp ~/console.log ~/jit-build.log "$OUT/" 2>/dev/null || true
}

run() { # run ENGINE "STEP ...": within CALL_S seconds (default 560)
  ENGINE=${1:?engine: vllm or sgl}
  local steps=${2:?steps} step t0=$SECONDS
  DEADLINE=$((SECONDS + ${CALL_S:-560}))
  {
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
    python3 -c 'import torch, sys; print(sys.version.split()[0], torch.__version__)'
    models
  } 2>&1 | tee -a ~/console.log
  for step in $steps; do
    echo "== $ENGINE $step at $((SECONDS - t0)) s" | tee -a ~/console.log
    "$step" 2>&1 | tee -a ~/console.log
  done
  echo "$ENGINE '$steps': $((SECONDS - t0)) s" | tee -a ~/console.log
  collect
}

unpack() {
  local at=${1:?usage: unpack FILES_AT} to=/tmp/gpu-4w
  mkdir -p $to
  for f in "$at"/*.tgz; do tar xzf "$f" -C $to; done
  cp "$at"/*.log $to/ 2>/dev/null || true
  # the run folder travels with the next call (a fresh machine resumes it)
  if [ -d $to/art ]; then tar czf $G4/4w/art.tgz -C $to art && du -sh $G4/4w/art.tgz; fi
  # and the JIT modules with the SGLang calls (.gpu-4w/jit: carry it beside .gpu-4w/4w)
  if [ -f "$at/jit.tgz" ]; then mkdir -p $G4/jit && cp "$at/jit.tgz" $G4/jit/ && du -sh $G4/jit; fi
  ls $to $to/art 2>/dev/null
}

case "${1:-}" in
prepare) prepare ;;
source) source_record | tee $G4/det/source.json >$G4/4w/source.json && cat $G4/4w/source.json ;;
run) run "${2:-}" "${3:-}" ;;
unpack) unpack "${2:-}" ;;
*) sed -n '2,19p' "$0" && exit 2 ;;
esac
