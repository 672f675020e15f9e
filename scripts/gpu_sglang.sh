#!/usr/bin/env bash
# SGLang 0.5.17 on the lent GPU (H100 or H200, sm90), end to end: the wheels from PyPI unpacked
# on a device machine that has torch 2.11.0+cu130 and no network, `specbench matrix --launcher
# process --local-engine` over the tiny SGLang experiments, the recorder, `specbench report`,
# and the result brought back. docs/gpu-sglang-example/ holds what it made and the device
# minutes each call used (last run: 2026-12-06, see that README).
#
# Steps (prepare and unpack run here; run runs on the device machine through the workplace's
# device tool, in the repository's root there, as `bash scripts/gpu_sglang.sh run "STEP ..."`
# with carry [.gpu-sgl]; specbench runs from that root's bench/):
#   1. scripts/gpu_sglang.sh prepare     here: .gpu-sgl/ (git-ignored), about 63 MB, one call
#   2. run "dflash rec gptq"    install (5 s), then the steps named (functions below), each
#   3. run "tiny mtp rule"       skipped when the call's budget (CALL_S, 560 s) is nearly spent;
#                                a matrix resumes where an earlier call stopped
#   4. scripts/gpu_sglang.sh unpack FILES_AT   here: the tarballs from $OUT into /tmp/gpu-sgl
# Every call installs what is missing, so a call on a fresh machine costs only the unpacking.
# Nothing fetched is committed: prepare downloads the pinned wheels with pip every time.
#
# Why these pieces (each checked in the 0.5.17 / 0.4.5 source; ../shared/reference/
# gpu-sglang-h200.md has the whole story): sglang-kernel's FA3 library (1.07 GiB) is left out,
# so every server runs --attention-backend triton (and DFLASH's draft
# --speculative-draft-attention-backend triton); its sm100 build, infllm and flashmla are
# loaded only elsewhere; sgl-deep-gemm is imported by the EAGLE draft's graph capture;
# transformers 5.12.1 (sglang's pin) shadows the image's 5.17, whose registry clashes with
# sglang's qwen3_asr config; xgrammar 0.2.7 instead of the pinned 0.2.1 (44 MB).
set -euo pipefail

SGLANG_VERSION=0.5.17 # the last SGLang pinned to torch==2.11.0, the device image's torch
KERNEL_VERSION=0.4.5
DEEPGEMM_VERSION=0.1.5.post1
WHEELS=(annotated_types==0.8.0 apache_tvm_ffi==0.1.11 asttokens==3.0.2 cffi==2.1.1
  compressed_tensors==0.17.0 decorator==5.3.1 dill==0.4.1 distro==1.9.0 executing==2.3.0
  fastapi==0.136.3 flashinfer_python==0.6.15.post1 gguf==0.19.0 interegular==0.3.3
  ipython==9.8.0 ipython_pygments_lexers==1.1.1 jedi==0.20.1 jiter==0.19.0 jsonschema==4.26.0
  jsonschema_specifications==2025.9.1 llguidance==1.7.6 loguru==0.7.3 matplotlib_inline==0.2.2
  msgspec==0.23.0 openai==2.6.1 openai_harmony==0.0.4 orjson==3.13.0 parso==0.8.7
  partial_json_parser==0.2.1.1.post7 pexpect==4.9.0 prometheus_fastapi_instrumentator==8.1.0
  prompt_toolkit==3.0.53 ptyprocess==0.7.0 pure_eval==0.2.4 pybase64==1.5.1 pycparser==3.12
  pydantic==2.14.4 pydantic_core==2.50.5 python_multipart==0.0.34 pyzmq==27.3.0
  referencing==0.37.0 rpds_py==2026.9.1 setproctitle==1.3.8 sniffio==1.3.1 soundfile==0.13.1
  stack_data==0.6.3 starlette==1.10.0 tokenizers==0.22.2 traitlets==5.16.1
  transformers==5.12.1 typing_inspection==0.4.5 uvicorn==0.55.0 watchfiles==1.3.0
  wcwidth==0.9.4 xgrammar==0.2.7 zstandard==0.25.0)
PLATFORMS=(--python-version 3.12 --implementation cp --only-binary=:all:
  --platform manylinux_2_34_x86_64 --platform manylinux_2_28_x86_64
  --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
  --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64
  --platform manylinux_2_31_x86_64 --platform manylinux_2_35_x86_64)
KERNEL_EXCLUDE=(sgl_kernel/flash_ops.abi3.so sgl_kernel/sm100 'sgl_kernel/infllm_ops*'
  sgl_kernel/flashmla_ops.abi3.so)
G=.gpu-sgl
SGL=$HOME/sgl
ART=$HOME/art

xz_dir() { # xz_dir ARCHIVE DIR [tar args...]: DIR's content as ARCHIVE
  local out=$1 dir=$2
  shift 2
  (cd "$dir" && tar cf - "$@") | xz -9 -T2 >"$out"
}

prepare() {
  # run here, in the checkout the device tool sends (its root)
  local root dl
  root=$(pwd)
  dl=${SPECBENCH_GPU_DL:-$root/$G/dl}
  grep -qx "/$G/" .git/info/exclude 2>/dev/null || echo "/$G/" >>.git/info/exclude
  mkdir -p "$dl/whl" $G/c $G/patch
  python3 -m pip download -q --no-deps "${PLATFORMS[@]}" -d "$dl" sglang==$SGLANG_VERSION \
    sglang-kernel==$KERNEL_VERSION sgl-deep-gemm==$DEEPGEMM_VERSION
  python3 -m pip download -q --no-deps "${PLATFORMS[@]}" -d "$dl/whl" "${WHEELS[@]}"
  rm -rf "$dl/x" && mkdir -p "$dl/x/k" "$dl/x/s" "$dl/x/d" "$dl/x/w"
  (cd "$dl/x/k" && unzip -q "$dl"/sglang_kernel-$KERNEL_VERSION-*.whl)
  (cd "$dl/x/s" && unzip -q "$dl"/sglang-$SGLANG_VERSION-*.whl)
  (cd "$dl/x/d" && unzip -q "$dl"/sgl_deep_gemm-$DEEPGEMM_VERSION-*.whl && rm -rf deep_gemm/include)
  local ex=() e
  for e in "${KERNEL_EXCLUDE[@]}"; do ex+=("--exclude=$e"); done
  xz_dir "$root/$G/c/K.tar.xz" "$dl/x/k" "${ex[@]}" .
  xz_dir "$root/$G/c/S.tar.xz" "$dl/x/s" .
  xz_dir "$root/$G/c/D.tar.xz" "$dl/x/d" .
  python3 -m pip install -q --no-deps --no-compile "${PLATFORMS[@]}" --target "$dl/x/w" \
    "$dl"/whl/*.whl
  # jedi (33 MB unpacked, 3.3 MB packed) is optional to IPython (core/completer.py imports it in
  # a try); without it the SGLang carry and the determinism models fit 64 MiB beside the tree
  rm -rf "$dl/x/w/jedi" "$dl"/x/w/jedi-*.dist-info
  xz_dir "$root/$G/c/W.tar.xz" "$dl/x/w" .
  prepare_project
}

prepare_project() { # the tiny models, our code and the patch (fast: rerun after code changes)
  local root
  root=$(pwd)
  rm -rf $G/m && .venv/bin/specbench tiny-model $G/m --quantization gptq-4bit >/dev/null
  xz_dir "$root/$G/c/M.tar.xz" $G/m . && rm -rf $G/m
  # the patched files, made here with GNU patch (zero fuzz) from the wheel's own files
  rm -rf $G/patch && mkdir -p $G/patch/tree
  local dl=${SPECBENCH_GPU_DL:-$root/$G/dl} f
  (cd "$dl/x/s" && tar cf - $(sed -n 's#^+++ b/##p' \
    "$root"/docker/sglang/patches-0.5.17/*.patch)) | (cd $G/patch/tree && tar xf -)
  for f in docker/sglang/patches-0.5.17/*.patch; do
    patch -d $G/patch/tree -p1 --fuzz=0 --no-backup-if-mismatch <"$f"
    cp "$f" $G/patch/
  done
  du -sh $G/c/* $G/patch
  du -sh --exclude=dl $G
}

device_env() {
  export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
  export NVSHMEM_DISABLE_NVLS=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 DO_NOT_TRACK=1
  export SGLANG_TREE=${SGLANG_TREE:-patched} TVM_FFI_CACHE_DIR=$HOME/jit
  # pkgs-<tree>: sglang (stock or patched), sgl_kernel, deep_gemm; site: the carried wheels
  export PYTHONPATH=$SGL/pkgs-$SGLANG_TREE:$SGL/site
}

install() {
  if [ ! -f "$SGL/.installed" ]; then
    mkdir -p "$SGL/pkgs-stock" "$SGL/site" "$SGL/models"
    tar xJf $G/c/K.tar.xz -C "$SGL/pkgs-stock"
    tar xJf $G/c/S.tar.xz -C "$SGL/pkgs-stock"
    tar xJf $G/c/D.tar.xz -C "$SGL/pkgs-stock"
    tar xJf $G/c/W.tar.xz -C "$SGL/site"
    tar xJf $G/c/M.tar.xz -C "$SGL/models"
    rm -rf "$SGL/pkgs-patched" && cp -a "$SGL/pkgs-stock" "$SGL/pkgs-patched"
    cp -a $G/patch/tree/. "$SGL/pkgs-patched/" # the files prepare patched here
    touch "$SGL/.installed"
  fi
  # a JIT cache an earlier call brought back (unpack made .gpu-sgl/c/J.tar.xz of its built
  # modules): SGLang loads a module whose .so is in TVM_FFI_CACHE_DIR instead of compiling it
  # (the GPTQ Marlin GEMM took 6 min of nvcc on a 16-core H100 host)
  if [ -f $G/c/J.tar.xz ] && [ ! -d "$HOME/jit" ]; then
    mkdir -p "$HOME/jit" && tar xJf $G/c/J.tar.xz -C "$HOME/jit"
  fi
  rm -rf /models && ln -s "$SGL/models" /models
}

left() { echo $((DEADLINE - SECONDS)); } # seconds left of this call's budget

matrix() { # matrix EXPERIMENT [--only NAME ...]: stops 30 s before the call's budget ends
  local exp=$1
  shift
  if [ "$(left)" -lt 90 ]; then
    echo "skipped $exp: $(left) s left"
    return 0
  fi
  (timeout "$(($(left) - 30))" python3 -m bench matrix \
    "bench/experiments/$exp.yaml" --out "$ART/$exp" --launcher process --local-engine \
    --allow-unpinned --model-cache /models --no-progress --resume "$@") || true
}

report() { # report EXPERIMENT
  (timeout 60 python3 -m bench report "$ART/$1" --out "$HOME/report/$1") || true
}

collect() {
  # $OUT: at most 8 files, 2 folders deep; tar the artifacts, keep the console log readable
  mkdir -p "$OUT"
  local d
  for d in art report rec jit; do # each only when a step made it (a missing one ended collect)
    if [ -d ~/$d ]; then tar czf "$OUT/$d.tgz" -C ~ $d; fi
  done
  cp ~/console.log "$OUT/" 2>/dev/null || true
}

# The steps, in the order the calls took them (run "STEP ..."):
dflash() { matrix tiny-sglang-gpu-dflash && report tiny-sglang-gpu-dflash; }
tiny() { matrix tiny-sglang-gpu && report tiny-sglang-gpu; }
mtp() { matrix tiny-sglang-gpu-mtp && report tiny-sglang-gpu-mtp; }
rec() { # the recorder: one DFLASH server, streams, /metrics, /server_info, SIGTERM
  [ "$(left)" -gt 150 ] || { echo "skipped rec: $(left) s left" && return 0; }
  (timeout 240 python3 tests/gpu/record_sglang_gpu.py --out ~/rec/dflash) || true
}
gptq() { # the seed's bug: the stock tree for mtp-stock, the patched one for the rest
  SGLANG_TREE=stock device_env
  matrix tiny-sglang-gpu-gptq --only mtp-stock
  SGLANG_TREE=patched device_env
  matrix tiny-sglang-gpu-gptq --only baseline --only mtp
  report tiny-sglang-gpu-gptq
}
gptqp() { # the patched configurations alone, each server given READY_S (default 150 s)
  matrix tiny-sglang-gpu-gptq --only baseline --only mtp --ready-timeout "${READY_S:-150}"
  report tiny-sglang-gpu-gptq
}
gptqe() { # the same without CUDA graphs (the graph capture stalled): stock first, then patched
  SGLANG_TREE=stock device_env
  matrix tiny-sglang-gpu-gptq-eager --only mtp-stock-eager
  SGLANG_TREE=patched device_env
  matrix tiny-sglang-gpu-gptq-eager --only mtp-eager --only baseline-eager
  report tiny-sglang-gpu-gptq-eager
}
probe() { # probe NAME DEADLINE_S FLAGS...: tests/gpu/stall_probe.py on mtp35-gptq (stacks on a stall)
  local name=$1 deadline=$2
  shift 2
  [ "$(left)" -gt $((deadline + 40)) ] || { echo "skipped probe $name: $(left) s left" && return 0; }
  (timeout $((deadline + 30)) python3 tests/gpu/stall_probe.py --out ~/rec/"$name" \
    --model /models/mtp35-gptq --stall-s "${STALL_S:-60}" --deadline-s "$deadline" -- \
    --context-length 1024 --mem-fraction-static 0.2 --max-running-requests 4 \
    --attention-backend triton --sampling-backend pytorch --cuda-graph-backend-prefill disabled \
    "$@") || true
  grep -v "GET /health" ~/rec/"$name"/server.log | tail -n 80 || true
}
stall() { # the patched baseline with graphs on, its stacks dumped when the capture stalls
  probe stall 200
}
marlin() { # the patched baseline eager on gptq_marlin, kernel launches synchronous, stacks on the stall
  CUDA_LAUNCH_BLOCKING=1 probe marlin-eager 110 --disable-cuda-graph
}
jit() { # the same, given time: SGLang 0.5.17 JIT-compiles gptq_marlin_gemm (tvm_ffi, ninja, nvcc)
  # at the first forward; the compiler's processes are listed every 30 s and the built module is
  # brought back (TVM_FFI_CACHE_DIR=~/jit)
  (while sleep 30; do ps -eo etimes,args | grep -E "nvcc|cicc|ptxas|ninja" | grep -v grep |
    cut -c1-160 | head -4; done) &
  local watcher=$!
  STALL_S=${JIT_S:-400} probe marlin-jit "${JIT_S:-400}" --disable-cuda-graph
  kill $watcher || true
  du -sh ~/jit/* || true
}
gptqk() { # the non-Marlin GPTQ kernel in float16: a probe, then stock vs patched if it served
  export SGLANG_MAMBA_CONV_DTYPE=float16
  probe gptq-fp16 110 --disable-cuda-graph --quantization gptq --dtype float16
  if grep -q '"outcome": "served"' ~/rec/gptq-fp16/probe.json 2>/dev/null; then
    SGLANG_TREE=stock device_env
    matrix tiny-sglang-gpu-gptq-kernel --only mtp-stock-gptqk
    SGLANG_TREE=patched device_env
    matrix tiny-sglang-gpu-gptq-kernel --only mtp-gptqk --only baseline-gptqk
    report tiny-sglang-gpu-gptq-kernel
  fi
  unset SGLANG_MAMBA_CONV_DTYPE
}
rule() { # the shape that hides the bug, stock only
  SGLANG_TREE=stock device_env
  matrix tiny-sglang-gpu-gptq-mtprule
  SGLANG_TREE=patched device_env
  report tiny-sglang-gpu-gptq-mtprule
}

run() { # run "STEP ...": the steps above, in order, within CALL_S seconds (default 560)
  local steps=${1:?steps} step t0=$SECONDS
  DEADLINE=$((SECONDS + ${CALL_S:-560}))
  device_env
  {
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
    python3 -c 'import torch, sys; print(sys.version.split()[0], torch.__version__)'
    install
    echo "install: $((SECONDS - t0)) s"
  } 2>&1 | tee -a ~/console.log
  for step in $steps; do
    echo "== $step at $((SECONDS - t0)) s" | tee -a ~/console.log
    "$step" 2>&1 | tee -a ~/console.log
  done
  nvidia-smi >>~/console.log 2>&1 || true
  echo "steps '$steps': $((SECONDS - t0)) s" | tee -a ~/console.log
  collect
}

unpack() {
  local at=${1:?usage: unpack FILES_AT} to=/tmp/gpu-sgl
  mkdir -p $to
  for f in "$at"/*.tgz; do tar xzf "$f" -C $to; done
  # the built JIT modules (their .so alone) travel with the next calls (see install)
  if [ -d $to/jit ]; then
    (cd $to/jit && find . -name '*.so' | tar cf - -T -) | xz -9 -T2 >$G/c/J.tar.xz
    tar tJf $G/c/J.tar.xz && du -sh $G/c/J.tar.xz
  fi
  ls $to
}

case "${1:-}" in
prepare) prepare ;;
prepare-project) prepare_project ;;
run) run "${2:-}" ;;
unpack) unpack "${2:-}" ;;
*) sed -n '2,24p' "$0" && exit 2 ;;
esac
