"""What a client reads from the pinned engines over HTTP, reproduced by the emulator: the
chat-completion chunks and responses, errors, the model card, and the /metrics names.

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
