"""Issue 37: the per-request acceptance fields the runner asks for and reads, and that the
emulator sends, exist with these names in the pinned engines (SGLang 0.5.19's
``return_spec_tokens_details`` / ``sglext.spec_tokens_details``; vLLM 0.33.0's
``metrics.speculative_decoding``, a server flag and no request field)."""

from __future__ import annotations

import ast
from pathlib import Path

from bench.emulator import formats
from bench.measure._requestacc import SGLANG_FIELDS, SGLANG_REQUEST_FIELD, VLLM_FIELDS


def fields(path: Path, cls: str) -> set[str]:
    """The annotated field names of every class ``cls`` in ``path``."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    out.add(item.target.id)
    assert out, f"no class {cls} with fields in {path}"
    return out


def test_sglang_names(sglang_src: Path) -> None:
    proto = sglang_src / "sglang" / "srt" / "entrypoints" / "openai" / "protocol.py"
    assert SGLANG_REQUEST_FIELD in fields(proto, "ChatCompletionRequest")
    assert "sglext" in fields(proto, "ChatCompletionStreamResponse")
    assert "spec_tokens_details" in fields(proto, "SglExt")
    details = fields(proto, "SpecTokensDetails")
    assert set(SGLANG_FIELDS) <= details
    # the emulator's chunk carries exactly SGLang's fields
    assert set(formats.sglang_spec_tokens_details(1, 1, 1, 2, [0, 1])) == details


def test_vllm_names(vllm_src: Path) -> None:
    root = vllm_src / "vllm"
    base = root / "entrypoints" / "generate" / "base" / "protocol.py"
    metrics = fields(base, "SpeculativeDecodingMetrics")
    assert set(VLLM_FIELDS) <= metrics
    # the emulator's summary level: every field but the detailed level's per-step arrays
    sent = set(formats.vllm_spec_decoding_metrics(2, [1, 0, 2], detailed=False))
    assert sent == metrics - {"per_step_accepted", "per_step_drafted"}
    assert "speculative_decoding" in fields(base, "PerRequestMetrics")
    chat = root / "entrypoints" / "openai" / "chat_completion" / "protocol.py"
    assert "metrics" in fields(chat, "ChatCompletionStreamResponse")
    # a server setting, not a request field: the runner cannot ask for it per request
    assert "per_request_spec_decode_metrics" in fields(
        root / "config" / "observability.py", "ObservabilityConfig"
    )
    asks = {"spec_decode", "speculative", "spec_token", "accept"}
    assert not {f for f in fields(chat, "ChatCompletionRequest") if any(a in f for a in asks)}
