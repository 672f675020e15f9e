"""Write the tiny target and its partial draft: same bytes for the same spec, every run."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from bench.core import InputError
from bench.tinymodel._safetensors import write_bf16_safetensors
from bench.tinymodel._spec import TinyModel, TinyModels, TinyModelSpec
from bench.tinymodel._tokenizer import (
    END_OF_TEXT,
    IM_END,
    special_id,
    tokenizer_config,
    tokenizer_json,
    train_tokenizer,
)
from bench.tinymodel._weights import (
    Weights,
    draft_weights,
    generation_config,
    qwen3_config,
    target_weights,
)

WEIGHTS_FILE = "model.safetensors"


def _json_text(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def _write_model(
    folder: Path, weights: Weights, texts: dict[str, str], role: str, spec: TinyModelSpec
) -> TinyModel:
    folder.mkdir(parents=True, exist_ok=True)
    files = dict(texts)
    files["specbench-tiny-model.json"] = _json_text(
        {"role": role, "generator": "specbench tiny-model", "spec": spec.model_dump()}
    )
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    write_bf16_safetensors(folder / WEIGHTS_FILE, weights)
    digests = {
        name: hashlib.sha256((folder / name).read_bytes()).hexdigest()
        for name in sorted([*files, WEIGHTS_FILE])
    }
    return TinyModel(
        path=folder,
        parameters=sum(int(w.size) for w in weights.values()),
        size_bytes=sum((folder / name).stat().st_size for name in digests),
        sha256=digests,
    )


def make_tiny_models(
    out_dir: Path, seed: int = 0, *, spec: TinyModelSpec | None = None
) -> TinyModels:
    """Write ``out_dir/target`` (random Qwen3ForCausalLM, BPE tokenizer, ChatML template) and
    ``out_dir/draft`` (the target's weights plus small noise, same tokenizer).

    ``seed`` overrides ``spec.seed``. Nothing is downloaded; no torch is needed."""
    spec = (spec or TinyModelSpec()).model_copy(update={"seed": seed})
    spec = TinyModelSpec.model_validate(spec.model_dump())
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(str(out_dir), "exists and is not a folder")
    tok = train_tokenizer(spec.seed, spec.corpus_lines, spec.vocab_size)
    vocab_size = tok.get_vocab_size()
    bos_id, eos_id = special_id(tok, END_OF_TEXT), special_id(tok, IM_END)
    texts = {
        "config.json": _json_text(qwen3_config(spec, vocab_size, bos_id, eos_id)),
        "generation_config.json": _json_text(generation_config(bos_id, [eos_id, bos_id])),
        "tokenizer.json": tokenizer_json(tok) + "\n",
        "tokenizer_config.json": _json_text(tokenizer_config(tok, spec.max_position_embeddings)),
    }
    target = target_weights(spec, vocab_size)
    try:
        made_target = _write_model(out_dir / "target", target, texts, "target", spec)
        made_draft = _write_model(
            out_dir / "draft", draft_weights(spec, target), texts, "draft", spec
        )
    except OSError as err:
        raise InputError(str(out_dir), f"cannot write: {err}") from None
    return TinyModels(spec=spec, vocab_size=vocab_size, target=made_target, draft=made_draft)
