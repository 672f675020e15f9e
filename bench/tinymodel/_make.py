"""Write the tiny models (target, partial draft, the seed methods' chain models): same bytes for
the same spec, every run."""

from __future__ import annotations

import hashlib
import json
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy.typing as npt
from tokenizers import Tokenizer

from bench.core import InputError, ensure_dir, parse_json, read_json, write_bytes
from bench.tinymodel._chain import (
    F32,
    MIN_MARGIN,
    chain_cycle,
    chain_embedding,
    chain_lm_head,
    check_chain,
)
from bench.tinymodel._dflash import copy_logits, dflash_config, dflash_weights
from bench.tinymodel._gptq import GptqOptions, gptq_mtp_weights, gptq_quantization_config
from bench.tinymodel._gptq35 import gptq35_quantization_config, gptq_qwen35_weights
from bench.tinymodel._qwen3next import qwen3_next_config, qwen3_next_weights
from bench.tinymodel._qwen35 import check_mtp_head, qwen35_config, qwen35_weights
from bench.tinymodel._qwen35vl import TINY_IMAGE_PROCESSOR, vl_config, vl_tensors
from bench.tinymodel._safetensors import safetensors_bytes
from bench.tinymodel._spec import TinyModel, TinyModels, TinyModelSpec
from bench.tinymodel._tokenizer import (
    END_OF_TEXT,
    IM_END,
    SPECIAL_TOKENS,
    special_id,
    tokenizer_config,
    tokenizer_json,
    train_tokenizer,
)
from bench.tinymodel._weights import (
    Weights,
    chain_target_weights,
    draft_weights,
    generation_config,
    qwen3_config,
    target_weights,
)

WEIGHTS_FILE = "model.safetensors"
#: the file that says a folder is a tiny model this command wrote, and lists its files
MARKER = "specbench-tiny-model.json"


def _json_text(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


@dataclass(frozen=True)
class _Planned:
    """One model folder, made in memory: nothing is written before every model is made (a
    bad option is refused before an existing model is touched)."""

    folder: Path
    files: dict[str, bytes]
    parameters: int


def _write_model(
    folder: Path,
    weights: Weights,
    texts: dict[str, str],
    role: str,
    spec: TinyModelSpec,
    *,
    tensors: dict[str, npt.NDArray[Any]] | None = None,
    extra: dict[str, Any] | None = None,
) -> _Planned:
    """One model folder's files: ``weights`` as bf16, or ``tensors`` (mixed dtypes: a
    quantized checkpoint) when given, ``weights`` then being the dense weights they encode
    (counted as its parameters). ``extra`` joins specbench-tiny-model.json."""
    files = dict(texts)
    # the manifest of the folder's own files: a later run replaces these and nothing else
    own = sorted([*texts, WEIGHTS_FILE, MARKER])
    files[MARKER] = _json_text(
        {"role": role, "generator": "specbench tiny-model", "spec": spec.model_dump()}
        | (extra or {})
        | {"files": own}
    )
    data = {name: text.encode("utf-8") for name, text in files.items()}
    data[WEIGHTS_FILE] = safetensors_bytes(weights if tensors is None else tensors)
    return _Planned(folder, data, sum(int(w.size) for w in weights.values()))


def _own_files(folder: Path, planned: _Planned) -> set[str]:
    """The files an earlier run wrote in ``folder``: its manifest's list (a manifest from
    before the list: the files a run writes there)."""
    try:
        doc = read_json(folder / MARKER, what="tiny model manifest")
    except InputError:
        doc = None
    listed = doc.get("files") if isinstance(doc, dict) else None
    if isinstance(listed, list) and all(isinstance(n, str) for n in listed):
        return {*listed, MARKER}
    return {*planned.files, MARKER}


def _check_replaceable(p: _Planned) -> None:
    """Refuse (exit 2, before anything is written) a folder of a model's name that is not a
    tiny model this command wrote, or that holds anything it did not write: replacing the
    folder would delete it."""
    folder = p.folder
    if not folder.exists() and not folder.is_symlink():
        return
    if folder.is_symlink() or not folder.is_dir() or not (folder / MARKER).is_file():
        raise InputError(
            str(folder),
            f"exists and is not a model `specbench tiny-model` wrote (no {MARKER}): it would "
            "be replaced; give another folder",
        )
    foreign = sorted({q.name for q in folder.iterdir()} - _own_files(folder, p))
    if foreign:
        raise InputError(
            str(folder / foreign[0]),
            f"not written by `specbench tiny-model` ({len(foreign)} such file(s) in "
            f"{folder.name}/): replacing the model would delete it; move it away first",
        )


def _commit(planned: _Planned) -> TinyModel:
    """Write one model folder whole: staged beside it, then swapped in (a failed write, a full
    disk, leaves the earlier folder as it was)."""
    folder = planned.folder
    token = secrets.token_hex(4)
    stage = folder.parent / f".{folder.name}.{token}.new"
    old = folder.parent / f".{folder.name}.{token}.old"
    try:
        for name, data in planned.files.items():
            write_bytes(stage / name, data, root=stage)
        if folder.exists():
            folder.rename(old)
        stage.rename(folder)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        if old.exists() and not folder.exists():
            old.rename(folder)
        raise
    shutil.rmtree(old, ignore_errors=True)
    digests = {n: hashlib.sha256(planned.files[n]).hexdigest() for n in sorted(planned.files)}
    return TinyModel(
        path=folder,
        parameters=planned.parameters,
        size_bytes=sum(len(b) for b in planned.files.values()),
        sha256=digests,
    )


def _write_gptq_mtp(
    folder: Path,
    spec: TinyModelSpec,
    options: GptqOptions,
    chain: tuple[int, F32, F32],
    texts: dict[str, str],
    ids: tuple[int, int],
) -> _Planned:
    """The MTP chain target GPTQ-packed (bench/tinymodel/_gptq.py), its MTP head BF16."""
    vocab_size, embedding, head = chain
    made = gptq_mtp_weights(spec, vocab_size, embedding, head, options)
    config = qwen3_next_config(spec, vocab_size, *ids)
    config["quantization_config"] = gptq_quantization_config(options, made.modules)
    return _write_model(
        folder,
        made.dense,
        texts | {"config.json": _json_text(config)},
        "mtp chain target, gptq 4-bit, bf16 mtp head",
        spec,
        tensors=made.tensors,
        extra={"gptq": options.model_dump()},
    )


def _write_gptq_mtp35(
    out_dir: Path,
    spec: TinyModelSpec,
    options: GptqOptions,
    chain: tuple[int, F32, F32],
    texts: dict[str, str],
) -> dict[str, _Planned]:
    """``mtp35`` GPTQ-packed (bench/tinymodel/_gptq35.py), its MTP head BF16, three times:
    without a rule about ``mtp.*`` (``mtp35_gptq``), with ``-:.*mtp.*``
    (``mtp35_gptq_mtprule``), and the first in the conditional-generation layout vLLM loads
    (``mtp35vl_gptq``, bench/tinymodel/_qwen35vl.py); the same tensors."""
    vocab_size, embedding, head = chain
    made = gptq_qwen35_weights(spec, vocab_size, embedding, head, options)
    config = parse_json(texts["config.json"], "config.json")
    out: dict[str, _Planned] = {}
    for key, folder, mtprule in (
        ("mtp35_gptq", "mtp35-gptq", False),
        ("mtp35_gptq_mtprule", "mtp35-gptq-mtprule", True),
    ):
        config["quantization_config"] = gptq35_quantization_config(
            options, made.modules, mtprule=mtprule
        )
        rule = "a -:.*mtp.* rule" if mtprule else "no rule about mtp.*"
        out[key] = _write_model(
            out_dir / folder,
            made.dense,
            texts | {"config.json": _json_text(config)},
            f"qwen3.5 mtp chain target, gptq 4-bit, bf16 mtp head, {rule}",
            spec,
            tensors=made.tensors,
            extra={"gptq": options.model_dump()},
        )
    # the seed's shape (no rule about mtp.*) in the layout vLLM loads (bench/tinymodel/_qwen35vl.py)
    config["quantization_config"] = gptq35_quantization_config(options, made.modules, mtprule=False)
    out["mtp35vl_gptq"] = _write_model(
        out_dir / "mtp35vl-gptq",
        made.dense,
        texts
        | {
            "config.json": _json_text(vl_config(config)),
            "preprocessor_config.json": _json_text(TINY_IMAGE_PROCESSOR),
        },
        "qwen3.5 mtp chain target, gptq 4-bit, bf16 mtp head, no rule about mtp.*, "
        "Qwen3_5ForConditionalGeneration layout (the mtp35-gptq tensors renamed)",
        spec,
        tensors=vl_tensors(made.tensors),
        extra={"gptq": options.model_dump()},
    )
    return out


def make_tiny_models(
    out_dir: Path,
    seed: int = 0,
    *,
    spec: TinyModelSpec | None = None,
    gptq: GptqOptions | None = None,
) -> TinyModels:
    """Write ``out_dir/target`` (random Qwen3ForCausalLM, BPE tokenizer, ChatML template),
    ``out_dir/draft`` (the target's weights plus small noise, same tokenizer), and the seed
    methods' models with answers known in advance (bench/tinymodel/_chain.py):
    ``out_dir/chain`` (Qwen3, next token ``sigma(t)``), ``out_dir/dflash`` (a DFlash draft
    that predicts ``sigma`` of its block's real token at every slot) and ``out_dir/mtp``
    (Qwen3-Next with one MTP layer that predicts the chain's next token exactly) and
    ``out_dir/mtp35`` (the same as a dense Qwen3.5 text model, bench/tinymodel/_qwen35.py); with
    ``gptq``, also ``out_dir/mtp-gptq``: ``mtp`` as a GPTQ 4-bit checkpoint whose MTP head stays
    BF16 (bench/tinymodel/_gptq.py), and ``out_dir/mtp35-gptq`` / ``out_dir/mtp35-gptq-mtprule``:
    ``mtp35`` so, without / with a ``-:.*mtp.*`` rule (bench/tinymodel/_gptq35.py); same
    answers.

    ``seed`` overrides ``spec.seed``. Nothing is downloaded; no torch is needed."""
    spec = (spec or TinyModelSpec()).model_copy(update={"seed": seed})
    spec = TinyModelSpec.model_validate(spec.model_dump())
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(str(out_dir), "exists and is not a folder")
    tok = train_tokenizer(spec.seed, spec.corpus_lines, spec.vocab_size)
    vocab_size = tok.get_vocab_size()
    bos_id, eos_id = special_id(tok, END_OF_TEXT), special_id(tok, IM_END)
    texts = _target_texts(spec, tok, vocab_size, (bos_id, eos_id))
    target = target_weights(spec, vocab_size)
    specials = {special_id(tok, name) for name in SPECIAL_TOKENS}
    sigma = chain_cycle(spec.seed, [i for i in range(vocab_size) if i not in specials])
    embedding = chain_embedding(spec.seed, vocab_size, spec.hidden_size, bos_id)
    head = chain_lm_head(embedding, sigma)
    mtp35 = qwen35_weights(spec, vocab_size, embedding, head)
    margin = min(
        check_chain(embedding, head, sigma),
        _check_copy(embedding, head, sigma, bos_id),
        check_mtp_head(mtp35, embedding, head, sigma),
    )
    chain = (vocab_size, embedding, head)
    try:
        planned = _plan_models(out_dir, spec, texts, (bos_id, eos_id), chain, target, mtp35, gptq)
        made = _write_planned(out_dir, planned)
    except OSError as err:
        raise InputError(str(out_dir), f"cannot write: {err}") from None
    return TinyModels(
        spec=spec,
        vocab_size=vocab_size,
        mask_token_id=bos_id,
        chain_next=sigma,
        chain_margin=margin,
        **made,
    )


def _target_texts(
    spec: TinyModelSpec, tok: Tokenizer, vocab_size: int, ids: tuple[int, int]
) -> dict[str, str]:
    """The target's text files (its config, generation config and tokenizer), which every
    other model shares or varies."""
    bos_id, eos_id = ids
    return {
        "config.json": _json_text(qwen3_config(spec, vocab_size, bos_id, eos_id)),
        "generation_config.json": _json_text(generation_config(bos_id, [eos_id, bos_id])),
        "tokenizer.json": tokenizer_json(tok) + "\n",
        "tokenizer_config.json": _json_text(tokenizer_config(tok, spec.max_position_embeddings)),
    }


def _plan_models(
    out_dir: Path,
    spec: TinyModelSpec,
    texts: dict[str, str],
    ids: tuple[int, int],
    chain: tuple[int, F32, F32],
    target: Weights,
    mtp35: Weights,
    gptq: GptqOptions | None,
) -> dict[str, _Planned]:
    """Every model folder, made in memory, by its key in ``TinyModels``."""
    vocab_size, embedding, head = chain
    bos_id, eos_id = ids
    mtp_texts = texts | {
        "config.json": _json_text(qwen3_next_config(spec, vocab_size, bos_id, eos_id))
    }
    mtp35_texts = texts | {
        "config.json": _json_text(qwen35_config(spec, vocab_size, bos_id, eos_id))
    }
    dflash_texts = texts | {"config.json": _json_text(dflash_config(spec, vocab_size, bos_id))}
    del dflash_texts["generation_config.json"]
    planned = {
        "target": _write_model(out_dir / "target", target, texts, "target", spec),
        "draft": _write_model(out_dir / "draft", draft_weights(spec, target), texts, "draft", spec),
        "chain": _write_model(
            out_dir / "chain",
            chain_target_weights(spec, vocab_size, embedding, head),
            texts,
            "chain target",
            spec,
        ),
        "dflash": _write_model(
            out_dir / "dflash", dflash_weights(spec), dflash_texts, "dflash draft", spec
        ),
        "mtp": _write_model(
            out_dir / "mtp",
            qwen3_next_weights(spec, vocab_size, embedding, head),
            mtp_texts,
            "mtp chain target",
            spec,
        ),
        "mtp35": _write_model(
            out_dir / "mtp35", mtp35, mtp35_texts, "qwen3.5 mtp chain target", spec
        ),
    }
    if gptq is not None:
        planned["mtp_gptq"] = _write_gptq_mtp(out_dir / "mtp-gptq", spec, gptq, chain, texts, ids)
        planned |= _write_gptq_mtp35(out_dir, spec, gptq, chain, mtp35_texts)
    return planned


def _write_planned(out_dir: Path, planned: dict[str, _Planned]) -> dict[str, TinyModel]:
    """Write every model, now that each is made and every option checked; a folder of a
    model's name is replaced only when it holds nothing but what this command wrote there."""
    for p in planned.values():
        _check_replaceable(p)
    ensure_dir(out_dir, "out")
    return {key: _commit(p) for key, p in planned.items()}


def _check_copy(embedding: F32, head: F32, sigma: dict[int, int], mask: int) -> float:
    """The DFlash copy head's margin: at a mask slot, ``sigma(t)`` wins by the chain margin."""
    tokens = sorted(sigma)
    logits = copy_logits(embedding, head, tokens, mask)
    rows = list(range(len(tokens)))
    want = [sigma[t] for t in tokens]
    best = logits[rows, want].copy()
    logits[rows, want] = -float("inf")
    margin = float((best - logits.max(axis=1)).min())
    if margin < MIN_MARGIN:
        raise InputError("tiny-model", f"DFlash copy margin {margin:.2f} < {MIN_MARGIN}")
    return margin
