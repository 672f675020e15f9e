#!/usr/bin/env bash
# One call on the lent GPU machine (see /work/.library/device): the GPU-only tests, hardware
# capture and the bandwidth probe through the CLI, and GPU telemetry through the real
# measurement path (`specbench run` against the emulator while a bf16 matmul load runs).
# Writes everything under $OUT. The machine has no network: pydantic travels as wheels in .whl/.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT="${OUT:-/tmp/specbench-device}"
mkdir -p "$OUT"
python3 -m pip install -q --no-index --find-links .whl --target /tmp/specbench-deps \
  pydantic annotated-types typing-inspection typing-extensions >"$OUT/pip.txt" 2>&1
export PYTHONPATH="/tmp/specbench-deps:$PWD"

if [[ "${ONLY_TELEMETRY:-0}" != "1" ]]; then
  echo "== gpu tests"
  SPECBENCH_REQUIRE_GPU=1 python3 -m pytest -q -p no:cacheprovider tests/gpu 2>&1 | tail -15 | tee "$OUT/gpu-tests.txt"
  echo "== probe"
  python3 -m bench probe bandwidth --out "$OUT/bandwidth.json" 2>&1 | tail -3
fi
echo "== hardware"
python3 -m bench hardware --out "$OUT/hardware.json" 2>&1 | tail -3

echo "== telemetry through specbench run"
python3 -m bench.emulator vllm --port 18000 --profile vllm-dflash --time-scale 0.2 >"$OUT/emulator.log" 2>&1 &
emu=$!
# vLLM refuses connections while it loads (the profile's load time x the time scale).
python3 - <<'PY'
import time, urllib.request
for _ in range(240):
    try:
        urllib.request.urlopen("http://127.0.0.1:18000/health", timeout=1)
        break
    except OSError:
        time.sleep(0.5)
PY
python3 - <<'PY' &
import sys, time
sys.path.insert(0, "tests/gpu")
from gpuload import matmul_load
time.sleep(4)  # idle first, then load, so the windows differ
print("load:", matmul_load(20.0))
PY
load=$!
python3 -m bench run vllm --mode remote --base-url http://127.0.0.1:18000 \
  --hf-id btbtyler09/Qwen3.8-27B-GPTQ-4bit --served-model qwen38-27b-gptq --quantization GPTQ-4bit \
  --hardware "$OUT/hardware.json" --spec-method dflash --spec-num-tokens 4 \
  --prompt-tokens 1044 --max-tokens 512 --concurrency 4 --warmup 1 --iterations 10 \
  --out "$OUT/payload-telemetry.json" 2>&1 | tail -8
wait "$load"
kill "$emu" 2>/dev/null
python3 - "$OUT/payload-telemetry.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
t = p["evidence"].get("telemetry")
print("simulated:", p["simulated"], "valid:", p["evidence"]["validity"]["valid"])
print("telemetry:", json.dumps(t, indent=1)[:3000] if t else None)
print("warnings:", p["evidence"]["warnings"], [r["code"] for r in p["evidence"]["validity"]["reasons"]])
PY
