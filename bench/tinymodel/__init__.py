"""Tiny random-weight Qwen3 models for engine tests: a target and a partly-agreeing draft, the
seed methods' chain models, and on request the MTP chain target GPTQ-packed.

Deterministic (same bytes for the same seed), about 1 MB each, written with numpy and the
``tokenizers`` library alone: nothing is downloaded and no torch is needed.
"""

from __future__ import annotations

from bench.tinymodel._gptq import GptqOptions
from bench.tinymodel._make import WEIGHTS_FILE, make_tiny_models
from bench.tinymodel._safetensors import (
    read_bf16_safetensors,
    read_safetensors,
    write_bf16_safetensors,
    write_safetensors,
)
from bench.tinymodel._spec import TinyModel, TinyModels, TinyModelSpec
from bench.tinymodel._tokenizer import CHAT_TEMPLATE, IM_END, IM_START, SPECIAL_TOKENS

__all__ = [
    "CHAT_TEMPLATE",
    "IM_END",
    "IM_START",
    "SPECIAL_TOKENS",
    "WEIGHTS_FILE",
    "GptqOptions",
    "TinyModel",
    "TinyModelSpec",
    "TinyModels",
    "make_tiny_models",
    "read_bf16_safetensors",
    "read_safetensors",
    "write_bf16_safetensors",
    "write_safetensors",
]
