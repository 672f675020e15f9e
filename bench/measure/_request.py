"""What each measured request sends beyond the measurement contract's body (``chat_body``) and
what the payload records of it: the prompt set's messages, the chat template's kwargs
(``enable_thinking``), the engine's per-request speculative counts where it offers them, the
sampling settings and what is known of the chat template."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from bench.core import InputError, exists, read_json, read_text
from bench.measure._client import chat_body, request
from bench.measure._requestacc import SGLANG_REQUEST_FIELD
from bench.measure._runspec import RunSpec
from bench.schema import ChatTemplateRecord, SamplingRecord

#: the timeout of a request that is not measured (a probe, /server_info, a prompt-size count)
PROBE_TIMEOUT_S = 10.0


def template_kwargs(spec: RunSpec) -> dict[str, Any]:
    """The request's chat_template_kwargs ({}: none sent)."""
    return {} if spec.enable_thinking is None else {"enable_thinking": spec.enable_thinking}


def asks_spec_tokens(spec: RunSpec) -> bool:
    """Whether the requests ask for the engine's per-request speculative counts: SGLang
    0.5.19's ``return_spec_tokens_details`` (a request field), on prompt-set workloads of a
    speculative configuration. vLLM 0.33.0 has no request field for it (its server flag
    ``--per-request-spec-decode-metrics``), so nothing is asked there; what a vLLM server
    started with that flag sends is read all the same."""
    return spec.engine == "sglang" and spec.spec_method != "NONE" and spec.prompt_set is not None


def request_body(
    spec: RunSpec, prompt: str, messages: list[dict[str, str]] | None = None, max_tokens: int = 0
) -> dict[str, Any]:
    """One request's body: the measurement contract's (``chat_body``) with the prompt set's
    messages, the chat template kwargs and, where the engine offers it, the per-request
    speculative counts."""
    body = chat_body(spec.served_model, prompt, max_tokens or spec.max_tokens, spec.temperature)
    if messages is not None:
        body["messages"] = messages
    if spec.enable_thinking is not None:
        body["chat_template_kwargs"] = template_kwargs(spec)
    if asks_spec_tokens(spec):
        body[SGLANG_REQUEST_FIELD] = True
    return body


def sampling_record(spec: RunSpec) -> SamplingRecord:
    """The sampling settings every measured request carries, read off the body itself."""
    body = request_body(spec, "")
    return SamplingRecord(
        temperature=float(body["temperature"]),
        top_p=body.get("top_p"),
        top_k=body.get("top_k"),
        max_tokens=int(body["max_tokens"]),
        ignore_eos=bool(body.get("ignore_eos", False)),
    )


def chat_template_record(spec: RunSpec, engine_said: str | None = None) -> ChatTemplateRecord:
    """What is known of the chat template: what the engine reports (SGLang's /server_info
    ``chat_template``, ``engine_said``; vLLM 0.33.0 reports none), the kwargs sent, and the
    template's sha256 when the model's tokenizer files are at hand."""
    kwargs = template_kwargs(spec)
    text, where = _template_text(spec.tokenizer)
    parts = [p for p in (engine_said, where) if p]
    return ChatTemplateRecord(
        kwargs=kwargs,
        enable_thinking=spec.enable_thinking,
        sha256=hashlib.sha256(text.encode()).hexdigest() if text is not None else None,
        source="; ".join(parts)
        or "the served model's own template, applied by the engine (not reported over HTTP; "
        "no tokenizer files at hand to hash it)",
    )


async def engine_chat_template(spec: RunSpec) -> str | None:
    """The chat template as the engine reports it: SGLang 0.5.19's /server_info carries its
    resolved server_args, ``chat_template`` among them (null: the model's own template;
    srt/entrypoints/http_server.py server_info). vLLM 0.33.0 has no such endpoint: None."""
    if spec.engine != "sglang":
        return None
    raw = await request(spec.base_url, "GET", "/server_info", timeout_s=PROBE_TIMEOUT_S)
    if raw.status != 200:
        return None
    try:
        info = json.loads(raw.body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(info, dict) or "chat_template" not in info:
        return None
    value = info["chat_template"]
    if value is None:
        return "SGLang /server_info chat_template: null (the served model's own template)"
    return f"SGLang /server_info chat_template: {str(value)[:200]}"


def _template_text(tokenizer: Path | None) -> tuple[str | None, str | None]:
    if tokenizer is None:
        return None, None
    folder = tokenizer if tokenizer.is_dir() else tokenizer.parent
    jinja = folder / "chat_template.jinja"
    if exists(jinja):
        # a template that is not text is recorded as not read, never hashed as something else
        try:
            return read_text(jinja, what="chat template"), str(jinja)
        except InputError:
            return None, None
    cfg = folder / "tokenizer_config.json"
    if exists(cfg):
        try:
            doc = read_json(cfg, what="tokenizer config")
        except InputError:
            doc = None
        tpl = doc.get("chat_template") if isinstance(doc, dict) else None
        if isinstance(tpl, str):
            return tpl, f"{cfg} chat_template"
    return None, None
