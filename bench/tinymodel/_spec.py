"""What to make (the knobs) and what was made (paths, sizes, digests)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field

from bench.core import DRAFT_NOISE, StrictModel


class TinyModelSpec(StrictModel):
    """Shape and randomness of the tiny Qwen3 pair. Defaults: ~0.55 M parameters, ~1.1 MB."""

    seed: int = Field(default=0, ge=0)
    hidden_size: int = Field(default=128, gt=0)
    intermediate_size: int = Field(default=256, gt=0)
    num_layers: int = Field(default=2, gt=0)
    num_heads: int = Field(default=4, gt=0)
    num_kv_heads: int = Field(default=2, gt=0)
    head_dim: int = Field(default=32, gt=0)
    max_position_embeddings: int = Field(default=4096, gt=0)
    #: BPE target size (the trainer stops earlier when the corpus has no more merges)
    vocab_size: int = Field(default=1024, ge=300)
    corpus_lines: int = Field(default=400, gt=0)
    #: untied random weights ~ N(0, weight_std): a model that does not just echo its input
    weight_std: float = Field(default=0.2, gt=0)
    #: draft = target + N(0, draft_noise): agrees only partly with the target
    draft_noise: Annotated[float, DRAFT_NOISE.field()] = 0.01


class TinyModel(StrictModel):
    """One written model folder."""

    path: Path
    parameters: int
    size_bytes: int
    sha256: dict[str, str]  # file name -> sha256 of its bytes


class TinyModels(StrictModel):
    """The target and its partial draft, and the seed methods' chain models (same tokenizer
    and vocabulary; bench/tinymodel/_chain.py): ``chain`` (a Qwen3 target with a known next
    token), ``dflash`` (a DFlash draft for ``chain``; it loads against ``target`` too) and
    ``mtp`` (a Qwen3-Next chain target with one MTP layer), ``mtp35`` (the same chain as a dense
    Qwen3.5 text model, ``Qwen3_5ForCausalLM``); when asked for, ``mtp_gptq`` (``mtp``
    GPTQ-packed, its MTP head BF16) and ``mtp35_gptq`` / ``mtp35_gptq_mtprule`` (``mtp35`` so,
    without / with a ``-:.*mtp.*`` rule)."""

    spec: TinyModelSpec
    vocab_size: int
    target: TinyModel
    draft: TinyModel
    chain: TinyModel
    dflash: TinyModel
    mtp: TinyModel
    #: ``mtp`` as a GPTQ 4-bit checkpoint with a BF16 MTP head (bench/tinymodel/_gptq.py), when
    #: asked for
    mtp_gptq: TinyModel | None = None
    #: the MTP chain target as a dense Qwen3.5 text model (bench/tinymodel/_qwen35.py)
    mtp35: TinyModel
    #: ``mtp35`` as a GPTQ 4-bit checkpoint with a BF16 MTP head and no rule about ``mtp.*``
    #: (bench/tinymodel/_gptq35.py: the seed's shape), when asked for
    mtp35_gptq: TinyModel | None = None
    #: the same tensors with a ``-:.*mtp.*`` GPTQ ``dynamic`` rule, when asked for
    mtp35_gptq_mtprule: TinyModel | None = None
    #: ``mtp35_gptq``'s tensors as ``Qwen3_5ForConditionalGeneration`` (the layout vLLM 0.26.0
    #: loads, bench/tinymodel/_qwen35vl.py), when asked for
    mtp35vl_gptq: TinyModel | None = None
    #: DFlash's mask token (``dflash_config.mask_token_id``): ``<|endoftext|>``
    mask_token_id: int
    #: the chain's next token of every ordinary token id (``sigma``)
    chain_next: dict[int, int]
    #: the smallest gap between the chain token's logit and the runner-up (target and draft)
    chain_margin: float
