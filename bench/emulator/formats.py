"""Wire and log formats of the pinned engines, reproduced by the emulator.

Every shape here names the upstream file and line it was read from, so the contract tests can
check it against the pinned wheels (vLLM 0.33.0, SGLang 0.5.19, extracted under
/work/upstream/src/). Paths are relative to the wheel root. Nothing here is copied code: the
builders write the same JSON keys, in the same order, that the upstream serializers write.

Serialization facts that decide the shapes:
- vLLM streams ``chunk.model_dump_json(exclude_unset=True, exclude_none=not chunk.choices)``
  (vllm/entrypoints/openai/chat_completion/serving.py:497-500): a field passed explicitly as
  ``None`` is still written as ``null``; the usage chunk (``choices=[]``) drops every ``None``.
- SGLang streams msgspec structs (sglang/srt/entrypoints/openai/sse_utils.py:13-47):
  ``StreamDelta``/``StreamChunk`` omit defaults, ``StreamChoice`` writes every field, and
  ``reasoning_content`` has no default so it is always written. Its usage chunk is a pydantic
  ``model_dump_json()`` with no exclusions (serving_chat.py:1792-1799).
"""

from __future__ import annotations

import json
import time
from typing import Any, Final, Literal

Engine = Literal["vllm", "sglang"]
ENGINES: Final[tuple[Engine, ...]] = ("vllm", "sglang")

#: The header every emulator response carries; the measurement client marks payloads SIMULATED.
EMULATOR_HEADER: Final = "x-specbench-emulator"
SIMULATED_BANNER: Final = (
    "SIMULATED: specbench emulator ({engine} shape, profile {profile}) - not a real engine; "
    "every figure it produces is simulated"
)

#: EOS id reported as ``matched_stop`` on an SGLang stop; an emulator value, not the model's.
EMULATED_EOS_TOKEN_ID: Final = 248046


def _dumps(obj: Any) -> str:
    # Both engines write compact JSON (pydantic model_dump_json / msgspec): no spaces.
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def sse(data: str) -> bytes:
    """One server-sent event: ``data: <payload>\\n\\n`` (both engines)."""
    return f"data: {data}\n\n".encode()


#: vllm/entrypoints/openai/chat_completion/serving.py:507 and
#: sglang/srt/entrypoints/openai/serving_chat.py:1807: both end a stream with this event.
SSE_DONE: Final = b"data: [DONE]\n\n"


def chat_logprobs(
    tokens: list[tuple[str, float, tuple[tuple[str, float], ...]]], top_n: int, engine: Engine
) -> dict[str, Any]:
    """A chunk's ``choices[].logprobs`` for its tokens: (token, logprob, candidates with the
    sampled one first). vLLM: ``ChatCompletionLogProbs`` of ``ChatCompletionLogProbsContent``
    (token, logprob, bytes, top_logprobs; chat_completion/protocol.py:96-110), its top list the
    first ``top_n`` candidates (serving.py:1190-1214, sampled first); as recorded on a GPU
    (tests/fixtures/vllm-gpu/stream-logprobs.sse). SGLang: ``ChoiceLogprobs`` of
    ``ChatCompletionTokenLogprob`` (token, bytes, logprob, top_logprobs;
    sglang/srt/entrypoints/openai/protocol.py:147-161), its top list the engine's top-k
    (serving_chat.py:2028-2040)."""

    def one(token: str, logprob: float) -> dict[str, Any]:
        raw = list(token.encode())
        if engine == "vllm":
            return {"token": token, "logprob": logprob, "bytes": raw}
        return {"token": token, "bytes": raw, "logprob": logprob}

    content = []
    for token, logprob, top in tokens:
        entry = one(token, logprob)
        if engine == "sglang":  # the top-k by value, the sampled token among them or not
            top = tuple(sorted(top, key=lambda c: -c[1]))
        entry["top_logprobs"] = [one(t, lp) for t, lp in top[:top_n]]
        content.append(entry)
    return {"content": content}


# --------------------------------------------------------------------------------------------
# vLLM 0.33.0 chat-completion chunks
# --------------------------------------------------------------------------------------------
# Field order of ChatCompletionStreamResponse: id, object, created, model, choices, usage,
# system_fingerprint, prompt_token_ids, prompt_text, metrics, kv_transfer_params
# (vllm/entrypoints/openai/chat_completion/protocol.py:184-203); of the stream choice: index,
# delta, logprobs, finish_reason, stop_reason, token_ids, weight_versions (protocol.py:168-181).


def vllm_request_id(hex32: str) -> str:
    """vLLM ids are ``chatcmpl-<id>`` (chat_completion/serving.py:341-343)."""
    return f"chatcmpl-{hex32}"


def vllm_role_chunk(rid: str, created: int, model: str) -> str:
    """First event: the role with empty content, sent with the first output
    (chat_completion/serving.py:585-635; prompt_token_ids/prompt_text are passed as None)."""
    return _dumps(
        {
            "id": rid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "delta": {"role": "assistant", "content": ""},
                    "logprobs": None,
                    "finish_reason": None,
                }
            ],
            "prompt_token_ids": None,
            "prompt_text": None,
        }
    )


def vllm_content_chunk(
    rid: str,
    created: int,
    model: str,
    text: str,
    finish_reason: str | None,
    logprobs: dict[str, Any] | None = None,
) -> str:
    """A token delta; the last one carries finish_reason and stop_reason in the same event
    (chat_completion/serving.py:781-815; kv_transfer_params is always passed). ``logprobs``:
    ``chat_logprobs(..., "vllm")`` when the request asked for them."""
    choice: dict[str, Any] = {
        "index": 0,
        "delta": {"content": text},
        "logprobs": logprobs,
        "finish_reason": finish_reason,
    }
    if finish_reason is not None:
        choice["stop_reason"] = None
    choice["token_ids"] = None
    if finish_reason is not None:
        choice["weight_versions"] = None
    return _dumps(
        {
            "id": rid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [choice],
            "kv_transfer_params": None,
        }
    )


def vllm_usage_chunk(
    rid: str,
    created: int,
    model: str,
    prompt: int,
    completion: int,
    spec: dict[str, Any] | None = None,
) -> str:
    """Final usage event when ``stream_options.include_usage`` (chat_completion/serving.py:
    855-900); UsageInfo order prompt_tokens, total_tokens, completion_tokens
    (vllm/entrypoints/serve/engine/protocol.py:135-140); Nones dropped (choices empty).
    ``spec``: the per-request ``metrics.speculative_decoding`` a server started with
    ``--per-request-spec-decode-metrics`` puts on this chunk (serving.py:883-911)."""
    body: dict[str, Any] = {
        "id": rid,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [],
        "usage": {
            "prompt_tokens": prompt,
            "total_tokens": prompt + completion,
            "completion_tokens": completion,
        },
    }
    if spec is not None:
        body["metrics"] = {"speculative_decoding": spec}
    return _dumps(body)


def vllm_spec_decoding_metrics(k: int, histogram: list[int], detailed: bool) -> dict[str, Any]:
    """``SpeculativeDecodingMetrics`` (entrypoints/generate/base/protocol.py:100-119) as vLLM
    0.33.0 builds it (v1/metrics/stats.py:396-422 ``RequestSpecDecodeMetrics.to_dict``) from
    the verify steps' accepted counts; per-step arrays only at ``detailed`` (not emulated)."""
    steps = sum(histogram)
    accepted = sum(j * n for j, n in enumerate(histogram))
    drafted = steps * k
    del detailed
    return {
        "mean_acceptance_length": 1.0 + accepted / steps if steps else 1.0,
        "draft_acceptance_rate": accepted / drafted if drafted else 0.0,
        "acceptance_histogram": list(histogram),
        "num_spec_steps": steps,
        "num_accepted_draft_tokens": accepted,
        "num_draft_tokens": drafted,
        "num_spec_tokens": k,
    }


def vllm_full_response(
    rid: str,
    created: int,
    model: str,
    text: str,
    finish_reason: str,
    prompt: int,
    completion: int,
    logprobs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Non-streamed body (ChatCompletionResponse, chat_completion/protocol.py:143-167); the
    emulator writes the OpenAI core fields and vLLM's stop_reason/token_ids extras."""
    return {
        "id": rid,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text, "tool_calls": []},
                "logprobs": logprobs,
                "finish_reason": finish_reason,
                "stop_reason": None,
                "token_ids": None,
            }
        ],
        "service_tier": None,
        "system_fingerprint": None,
        "usage": {
            "prompt_tokens": prompt,
            "total_tokens": prompt + completion,
            "completion_tokens": completion,
            "prompt_tokens_details": None,
        },
        "prompt_logprobs": None,
        "prompt_token_ids": None,
        "kv_transfer_params": None,
    }


def vllm_error(message: str, err_type: str, code: int, param: str | None = None) -> dict[str, Any]:
    """ErrorResponse{error: ErrorInfo} (vllm/entrypoints/serve/engine/protocol.py:79-87)."""
    return {"error": {"message": message, "type": err_type, "param": param, "code": code}}


def vllm_model_not_found(model: str) -> dict[str, Any]:
    """404 for an unknown model name (vllm/entrypoints/openai/models/serving.py:53-62)."""
    return vllm_error(f"The model `{model}` does not exist.", "NotFoundError", 404, "model")


# --------------------------------------------------------------------------------------------
# SGLang 0.5.19 chat-completion chunks
# --------------------------------------------------------------------------------------------


def sglang_request_id(hex32: str) -> str:
    """SGLang streams ``meta_info["id"]``, the request's rid: a bare uuid4 hex."""
    return hex32


def _sglang_chunk(
    rid: str,
    created: int,
    model: str,
    delta: dict[str, Any],
    finish_reason: str | None = None,
    matched_stop: int | str | None = None,
    logprobs: dict[str, Any] | None = None,
) -> str:
    return _dumps(
        {
            "id": rid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "delta": delta,
                    "logprobs": logprobs,
                    "finish_reason": finish_reason,
                    "matched_stop": matched_stop,
                }
            ],
        }
    )


def sglang_role_chunk(rid: str, created: int, model: str) -> str:
    """First event per choice: role + empty content (serving_chat.py:1646-1657)."""
    return _sglang_chunk(
        rid, created, model, {"reasoning_content": None, "role": "assistant", "content": ""}
    )


def sglang_content_chunk(
    rid: str, created: int, model: str, text: str, logprobs: dict[str, Any] | None = None
) -> str:
    """A content delta (serving_chat.py:804-824), never carrying finish_reason."""
    return _sglang_chunk(
        rid, created, model, {"reasoning_content": None, "content": text}, logprobs=logprobs
    )


def sglang_finish_chunk(
    rid: str, created: int, model: str, finish_reason: str, matched_stop: int | None
) -> str:
    """Separate finish event after the content (serving_chat.py:1677-1693)."""
    return _sglang_chunk(
        rid, created, model, {"reasoning_content": None}, finish_reason, matched_stop
    )


def sglang_usage_chunk(rid: str, created: int, model: str, prompt: int, completion: int) -> str:
    """Usage event (serving_chat.py:1769-1799); UsageInfo fields from
    sglang/srt/entrypoints/openai/protocol.py:205-211; sglext (protocol.py:1264) is null."""
    return _dumps(
        {
            "id": rid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [],
            "usage": _sglang_usage(prompt, completion),
            "sglext": None,
        }
    )


def sglang_spec_tokens_details(
    verify_ct: int, correct: int, k: int, completion: int, histogram: list[int]
) -> dict[str, Any]:
    """``SpecTokensDetails`` (sglang/srt/entrypoints/openai/protocol.py:418-429) as SGLang
    0.5.19 fills it (srt/managers/tokenizer_manager.py:2796-2853): proposed drafts = verify_ct
    x (speculative_num_draft_tokens - 1) with speculative_num_draft_tokens = k + 1, accept
    rate = correct / proposed, accept length = completion tokens / verify_ct."""
    proposed = verify_ct * k
    return {
        "spec_accept_rate": correct / proposed if proposed else 0.0,
        "spec_accept_length": completion / verify_ct if verify_ct else 0.0,
        "spec_cap_length": 0.0,
        "spec_block_accept_length": 0.0,
        "spec_num_correct_drafts": correct,
        "spec_num_proposed_drafts": proposed,
        "spec_verify_ct": verify_ct,
        "spec_correct_drafts_histogram": list(histogram),
        "spec_cap_lens_histogram": [],
    }


def sglang_sglext_chunk(rid: str, created: int, model: str, details: dict[str, Any]) -> str:
    """The response-level ``sglext`` chunk of a stream that asked for
    ``return_spec_tokens_details`` (serving_chat.py:1735-1764): no choices, sent before the
    usage chunk; SglExt drops its None fields when serialised (protocol.py:445-449)."""
    return _dumps(
        {
            "id": rid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [],
            "sglext": {"spec_tokens_details": details},
        }
    )


def _sglang_usage(prompt: int, completion: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "total_tokens": prompt + completion,
        "completion_tokens": completion,
        "prompt_tokens_details": None,
        "reasoning_tokens": 0,
    }


def sglang_full_response(
    rid: str,
    created: int,
    model: str,
    text: str,
    finish_reason: str,
    matched_stop: int | None,
    prompt: int,
    completion: int,
    logprobs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Non-streamed body (ChatCompletionResponse, protocol.py:1212-1220; choice 1183-1196;
    message 1176-1180)."""
    return {
        "id": rid,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": text,
                    "reasoning_content": None,
                    "tool_calls": None,
                },
                "logprobs": logprobs,
                "finish_reason": finish_reason,
                "matched_stop": matched_stop,
                "hidden_states": None,
                "prompt_token_ids": None,
                "response_token_ids": None,
                "meta_info": None,
            }
        ],
        "usage": _sglang_usage(prompt, completion),
        "metadata": None,
        "sglext": None,
    }


def sglang_error(message: str, err_type: str, code: int) -> dict[str, Any]:
    """ErrorResponse (sglang/srt/entrypoints/openai/protocol.py:96-101)."""
    return {"object": "error", "message": message, "type": err_type, "param": None, "code": code}


# --------------------------------------------------------------------------------------------
# /v1/models
# --------------------------------------------------------------------------------------------


def model_card(engine: Engine, model: str, root: str, max_model_len: int) -> dict[str, Any]:
    """ModelCard: vllm/entrypoints/serve/engine/protocol.py:105-113 (owned_by "vllm", plus a
    permission list); sglang/srt/entrypoints/openai/protocol.py:77-86 (owned_by "sglang")."""
    card: dict[str, Any] = {
        "id": model,
        "object": "model",
        "created": int(time.time()),
        "owned_by": engine,
        "root": root,
        "parent": None,
        "max_model_len": max_model_len,
    }
    if engine == "vllm":
        card["permission"] = []
    return card


# --------------------------------------------------------------------------------------------
# Prometheus metrics (names, help strings, labels)
# --------------------------------------------------------------------------------------------
# Both engines expose prometheus_client's text format; the client library writes a counter
# ``x`` as ``x_total`` plus ``x_created`` and sorts labels by name in the version we pin
# (prometheus_client 0.26 generate_latest), which is what bench/emulator/metrics.py writes.

# vLLM: labelnames ["model_name", "engine"] (vllm/v1/metrics/loggers.py:499).
VLLM_LABELS: Final = ("model_name", "engine")
# loggers.py:528
VLLM_RUNNING: Final = (
    "vllm:num_requests_running",
    "Number of requests in model execution batches.",
)
# loggers.py:538
VLLM_WAITING: Final = ("vllm:num_requests_waiting", "Number of requests waiting to be processed.")
# loggers.py:748
VLLM_PROMPT_TOKENS: Final = ("vllm:prompt_tokens", "Number of prefill tokens processed.")
# loggers.py:799
VLLM_GENERATION_TOKENS: Final = ("vllm:generation_tokens", "Number of generation tokens processed.")
# loggers.py:809, + label finished_reason
VLLM_REQUEST_SUCCESS: Final = ("vllm:request_success", "Count of successfully processed requests.")
# Spec decode counters, created only when a speculative config is set
# (vllm/v1/spec_decode/metrics.py:229-263; per-position adds label "position").
VLLM_SPEC_DRAFTS: Final = ("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.")
VLLM_SPEC_DRAFT_TOKENS: Final = ("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.")
VLLM_SPEC_ACCEPTED: Final = ("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.")
VLLM_SPEC_ACCEPTED_PER_POS: Final = (
    "vllm:spec_decode_num_accepted_tokens_per_pos",
    "Accepted tokens per draft position.",
)

# SGLang scheduler gauges: labels model_name, engine_type, tp_rank, pp_rank, moe_ep_rank
# (sglang/srt/observability/metrics_collector.py:1103-1109; engine_type "unified" from
# sglang/srt/disaggregation/utils.py:107-112).
SGLANG_SCHED_LABELS: Final = ("model_name", "engine_type", "tp_rank", "pp_rank", "moe_ep_rank")
# metrics_collector.py:278
SGLANG_RUNNING: Final = ("sglang:num_running_reqs", "The number of running requests.")
# :284
SGLANG_QUEUE: Final = ("sglang:num_queue_reqs", "The number of requests in the waiting queue.")
# :296
SGLANG_GEN_THROUGHPUT: Final = ("sglang:gen_throughput", "The generation throughput (token/s).")
SGLANG_SPEC_ACCEPT_LENGTH: Final = (
    "sglang:spec_accept_length",
    "Mean acceptance length of speculative decoding (accepted drafts + bonus token per forward).",
)  # metrics_collector.py:425
SGLANG_SPEC_ACCEPT_RATE: Final = (
    "sglang:spec_accept_rate",
    "Speculative acceptance rate (`accepted drafts / proposed drafts` in batch).",
)  # metrics_collector.py:431
# Tokenizer-side counters: labels model_name, engine_type (tokenizer_manager.py:706-709),
# + is_streaming on the token/request counters; incremented once per finished request
# (metrics_collector.py:1747-1793). prometheus_client appends _total to these names itself
# only when missing, so the exposed names are exactly these.
SGLANG_TOK_LABELS: Final = ("model_name", "engine_type")
# :1521
SGLANG_PROMPT_TOKENS: Final = ("sglang:prompt_tokens_total", "Number of prefill tokens processed.")
# :1526
SGLANG_GENERATION_TOKENS: Final = (
    "sglang:generation_tokens_total",
    "Number of generation tokens processed.",
)
# :1531
SGLANG_SPEC_VERIFY_CALLS: Final = (
    "sglang:spec_verify_calls_total",
    "Number of speculative decoding verification calls.",
)
# :1606
SGLANG_NUM_REQUESTS: Final = ("sglang:num_requests_total", "Number of requests processed.")


# --------------------------------------------------------------------------------------------
# Log lines
# --------------------------------------------------------------------------------------------

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
