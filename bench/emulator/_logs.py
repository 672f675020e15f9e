"""The pinned engines' log lines, reproduced by the emulator: each engine's record format and
the templates of the lines it writes (startup, weight loading, CUDA graphs, throughput and
acceptance), each with the upstream ``file:line`` it was read from (vLLM 0.33.0, SGLang 0.5.19,
extracted under /work/upstream/src/; paths relative to the wheel root). The contract tests
check the templates against the pinned source (tests/contract/test_upstream_names.py).
"""

from __future__ import annotations

import time
from typing import Final

#: the line the emulator logs as it starts: nothing it writes is a measurement
SIMULATED_BANNER: Final = (
    "SIMULATED: specbench emulator ({engine} shape, profile {profile}) - not a real engine; "
    "every figure it produces is simulated"
)


# vLLM record format "(%(vllm_process_name)s pid=%(process)d) %(levelname)s %(asctime)s
# [%(fileinfo)s:%(lineno)d] %(message)s", date "%m-%d %H:%M:%S" (vllm/logger.py:28-33).
VLLM_LOG_DATEFMT: Final = "%m-%d %H:%M:%S"


def vllm_log(process: str, pid: int, level: str, source: str, message: str) -> str:
    """One vLLM log record; ``source`` is ``file.py:line`` of the upstream call. A multi-line
    message carries the prefix on every line (NewLineFormatter, formatter.py:74-77)."""
    stamp = time.strftime(VLLM_LOG_DATEFMT)
    prefix = f"({process} pid={pid}) {level} {stamp} [{source}] "
    return prefix + message.rstrip("\n").replace("\n", "\n" + prefix)


# Upstream call sites (file:line) and their templates, as printf-style upstream does.
VLLM_VERSION_LINE: Final = ("startup.py:38", "vLLM server version %s, serving model %s")
#: vllm/v1/engine/core.py:139-143, logged by the engine core: VllmConfig.__str__
#: (vllm/config/vllm.py:2815-2840) runs to some forty fields; the emulator writes the first
#: few, tensor_parallel_size among them, and ends with "..." where it stops
VLLM_ENGINE_CONFIG: Final = (
    "core.py:140",
    "Initializing a V1 LLM engine (v%s) with config: model=%r, speculative_config=%s, "
    "tokenizer=%r, skip_tokenizer_init=False, tokenizer_mode=auto, revision=None, "
    "tokenizer_revision=None, "
    "trust_remote_code=False, dtype=torch.float16, max_seq_len=%d, download_dir=None, "
    "load_format=auto, tensor_parallel_size=%d, pipeline_parallel_size=1, "
    "data_parallel_size=1, ...",
)
#: the same record unless VLLM_DISABLE_LOG_LOGO=1 (the GPU image's default): an ASCII logo,
#: monochrome when the formatter is not "color" (vllm/entrypoints/common/startup.py:19-38)
VLLM_VERSION_LOGO: Final = (
    "startup.py:38",
    "\n       █     █     █▄   ▄█\n"
    " ▄▄ ▄█ █     █     █ ▀▄▀ █  version %s\n"
    "  █▄█▀ █     █     █     █  model   %s\n"
    "   ▀▀  ▀▀▀▀▀ ▀▀▀▀▀ ▀     ▀\n",
)
#: vllm/entrypoints/common/startup.py:96 (0.33.0): the arguments that differ from the defaults,
#: a dict repr (the CPU build 0.32.0 logs the same from api_utils.py:286)
VLLM_NON_DEFAULT_ARGS: Final = ("startup.py:96", "non-default args: %s")
#: vllm/config/speculative.py:2031-2034 (0.33.0), logger.warning_once
VLLM_FLY: Final = (
    "speculative.py:2031",
    "FLy verification is a lossy speculative decoding method and may degrade model outputs.",
)
VLLM_MTP_DEPRECATED: Final = (
    "speculative.py:1247",
    "method `%s` is deprecated and replaced with mtp.",
)  # vllm/config/speculative.py:1247-1248
VLLM_LOADING_WEIGHTS: Final = ("default_loader.py:507", "Loading weights took %.2f seconds")
VLLM_MODEL_LOADING: Final = (
    "model_runner.py:429",
    "Model loading took %s GiB memory and %.6f seconds",
)  # vllm/v1/worker/gpu/model_runner.py:428-432
VLLM_STARTING_SERVER: Final = ("entry.py:139", "Starting vLLM server on %s")
VLLM_THROUGHPUT_LINE: Final = (
    "loggers.py:283",
    "Engine 000: Avg prompt throughput: %.1f tokens/s, Avg generation throughput: %.1f tokens/s, "
    "Running: %d reqs, Waiting: %d reqs",
)  # vllm/v1/metrics/loggers.py:281-300 (prefix "Engine %03d: " from the logger)
#: vllm/v1/spec_decode/metrics.py:120-137, logged every VLLM_LOG_STATS_INTERVAL (default 10 s,
#: vllm/envs.py:49) when drafts were observed in the interval.
VLLM_SPEC_LINE: Final = (
    "metrics.py:120",
    "SpecDecoding metrics: Mean acceptance length: %.2f, Accepted throughput: %.2f tokens/s, "
    "Drafted throughput: %.2f tokens/s, Accepted: %d tokens, Drafted: %d tokens, "
    "Per-position acceptance rate: %s, Avg Draft acceptance rate: %.1f%%",
)
VLLM_LOG_STATS_INTERVAL_S: Final = 10.0
#: vllm/v1/worker/gpu/model_runner.py:1163-1167 (same text at v1/worker/gpu_model_runner.py:6516)
VLLM_GRAPH_CAPTURED_LINE: Final = (
    "model_runner.py:1164",
    "Graph capturing finished in %.0f secs, took %.2f GiB",
)
#: vllm/config/vllm.py:2005 (--enforce-eager)
VLLM_EAGER_LINE: Final = ("vllm.py:2005", "Cudagraph is disabled under eager mode")
#: --cudagraph-metrics: vllm/compilation/cuda_graph.py:40-124, logged by
#: v1/metrics/loggers.py:343-344 each stats interval. One multi-line record; vLLM's
#: NewLineFormatter (logging_utils/formatter.py:74-77) repeats the record prefix on every line.
#: The record's [file:line] is cuda_graph.py:123, where log_fn (logger.info) is called, not the
#: caller in loggers.py: the H200 run of 0.26.0 logged "[cuda_graph.py:123]" on every line.
VLLM_CUDAGRAPH_SETTINGS: Final = (
    "cuda_graph.py:123",
    "**CUDAGraph Config Settings:**\n\n- Mode: %s\n- Capture sizes: %s\n\n**CUDAGraph Stats:**\n\n",
)
VLLM_CUDAGRAPH_COLUMNS: Final = (
    "Unpadded Tokens",
    "Padded Tokens",
    "Num Paddings",
    "Runtime Mode",
    "Count",
)


def vllm_cudagraph_table(mode: str, sizes: list[int], rows: list[tuple[int, int, str, int]]) -> str:
    """The CUDAGraph metrics message: settings, then one row per (unpadded, padded, runtime
    mode) with its count, most frequent first (cuda_graph.py:70-117)."""
    cells = [
        [str(u), str(p), str(p - u), m, str(c)]
        for u, p, m, c in sorted(rows, key=lambda r: r[3], reverse=True)
    ]
    cols = VLLM_CUDAGRAPH_COLUMNS
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(cols)]

    def row(values: list[str] | tuple[str, ...]) -> str:
        return "| " + " | ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)) + " |"

    head = row(cols) + "\n"
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|\n"
    body = "\n".join(row(c) for c in cells)
    return VLLM_CUDAGRAPH_SETTINGS[1] % (mode, sizes) + head + sep + body + "\n"


# SGLang record format "[%(asctime)s{prefix}] %(message)s", date "%Y-%m-%d %H:%M:%S", no level
# name (sglang/srt/utils/common.py:2353-2372); scheduler prefix " TP<rank>" (scheduler.py:5505).
SGLANG_LOG_DATEFMT: Final = "%Y-%m-%d %H:%M:%S"


def sglang_log(message: str, tp_rank: int | None = None) -> str:
    """One SGLang log record; scheduler/model-runner records carry `` TP<rank>``."""
    stamp = time.strftime(SGLANG_LOG_DATEFMT)
    prefix = f" TP{tp_rank}" if tp_rank is not None else ""
    return f"[{stamp}{prefix}] {message}"


#: sglang/srt/entrypoints/engine.py:1098: ``server_args=`` and the resolved ServerArgs as a dict
#: (server_args.py:3708 resolved_dict); the emulator writes a few of its keys, tp_size among them
SGLANG_SERVER_ARGS: Final = "server_args={args!r}"

#: sglang/srt/model_executor/model_runner.py:1128
SGLANG_LOAD_BEGIN: Final = "Load weight begin. avail mem={avail:.2f} GB"
#: sglang/srt/model_executor/model_runner.py:1220-1227 (quant part from the checkpoint config)
SGLANG_LOAD_END: Final = (
    "Load weight end. elapsed={elapsed:.2f} s, type={model_type}, {quant}"
    "avail mem={avail:.2f} GB, mem usage={usage:.2f} GB."
)
#: sglang/srt/models/qwen3_5_mtp.py:461-463 (logger.warning_once: once per process/TP rank)
SGLANG_SKIP_PARAM: Final = "Parameter {name} not found in params_dict, skip loading"
#: The seven MTP projection tensors named after qwen3_5_mtp.py renames "mtp." to "model." and
#: drops ".self_attn" (qwen3_5_mtp.py:333-341); they miss params_dict when the draft inherits
#: GPTQ (only qweight/scales/... exist) and fall through to the warning branch.
SGLANG_SKIPPED_MTP_TENSORS: Final = (
    "model.layers.0.q_proj.weight",
    "model.layers.0.k_proj.weight",
    "model.layers.0.v_proj.weight",
    "model.layers.0.o_proj.weight",
    "model.layers.0.mlp.gate_proj.weight",
    "model.layers.0.mlp.up_proj.weight",
    "model.layers.0.mlp.down_proj.weight",
)
#: sglang/srt/mem_cache/kv_cache_configurator.py:2126-2135 (a warning, once per rank)
SGLANG_MAMBA_CAP: Final = (
    "max_running_requests is capped to {cap} by the mamba state cache "
    "(max_mamba_cache_size={size}, {ratio} state slots per request). To raise it: increase "
    "--mamba-full-memory-ratio or --max-mamba-cache-size, or halve the state size with "
    "--mamba-ssm-dtype bfloat16."
)
#: sglang/srt/model_executor/model_runner_components/cuda_graph_setup.py:550-554 and :573-577;
#: ``phase`` is "target verify" with speculation, else "target decode"; ``backend`` is
#: "CUDA graph" on CUDA (:533-541). Split in two: the upstream f-string pieces are.
SGLANG_GRAPH_CAPTURE_LINE: Final = "Capture {phase} {backend} {edge}. "
SGLANG_GRAPH_BEGIN_STATS: Final = (
    "backend={backend}, num_tokens_per_req={per_req}, bs={bs}, avail mem={avail:.2f} GB"
)
SGLANG_GRAPH_END_STATS: Final = (
    "elapsed={elapsed:.2f} s, mem usage={usage:.2f} GB, avail mem={avail:.2f} GB."
)
#: sglang/srt/managers/scheduler.py:1145-1153
SGLANG_CAPACITY_LINE: Final = (
    "max_total_num_tokens={max_total}, chunked_prefill_size={chunked}, "
    "max_prefill_tokens={max_prefill}, max_running_requests={max_running}, "
    "context_len={context_len}, available_gpu_mem={avail:.2f} GB"
)
#: sglang/srt/entrypoints/http_server.py:2412
SGLANG_FIRED_UP: Final = "The server is fired up and ready to roll!"
#: sglang/srt/managers/scheduler_components/metrics_reporter.py:818-895; the hybrid-SSM usage
#: part from pool_stats_observer; "cuda graph" is the graph backend label (:175);
#: emitted every --decode-log-interval decode steps (default 40).
SGLANG_DECODE_LINE: Final = (
    "Decode batch, #running-req: {running}, #full token: {full_tokens}, "
    "full token usage: {full_usage:.2f}, mamba num: {mamba_num}, mamba usage: {mamba_usage:.2f}, "
    "{spec}cuda graph: {graph}, gen throughput (token/s): {gen_tput:.2f}, #queue-req: {queue}"
)
SGLANG_SPEC_PART: Final = "accept len: {accept_len:.2f}, accept rate: {accept_rate:.2f}, "
SGLANG_DECODE_LOG_INTERVAL: Final = 40
#: metrics_reporter.py:612-621 (hybrid usage parts abbreviated the same way)
SGLANG_PREFILL_LINE: Final = (
    "Prefill batch, #new-seq: {new_seq}, #new-token: {new_token}, #cached-token: 0, "
    "full token usage: {full_usage:.2f}, mamba usage: {mamba_usage:.2f}, "
    "#running-req: {running}, #queue-req: {queue}, #pending-token: 0, "
)
