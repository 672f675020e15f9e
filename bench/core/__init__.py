"""The bottom layer: errors and exit codes, the strict pydantic base, atomic files and
hashing, statistics, and the shared vocabulary (engine names, methods, banners, timestamps).
"""

from __future__ import annotations

from bench.core._errors import (
    InputError,
    RunError,
    SpecbenchError,
    describe_validation_error,
    describe_yaml_error,
)
from bench.core._files import ensure_dir, ensure_writable_file, sha256_file, write_bytes, write_text
from bench.core._model import MutableModel, StrictModel, read_json_model
from bench.core._read import parse_json, parse_yaml, read_json, read_text, read_yaml
from bench.core._stats import Summary, percentile, summarize, t_cdf, welch
from bench.core._vocab import (
    DRAFT_CHECKPOINT_METHODS,
    EMULATOR_IMAGE,
    ENGINE_NAMES,
    SIMULATED_BANNER,
    TOY_MODEL_BANNER,
    EngineName,
    SpecMethod,
    canonical_spec_method,
    utc_now,
)

__all__ = [
    "DRAFT_CHECKPOINT_METHODS",
    "EMULATOR_IMAGE",
    "ENGINE_NAMES",
    "SIMULATED_BANNER",
    "TOY_MODEL_BANNER",
    "EngineName",
    "InputError",
    "MutableModel",
    "RunError",
    "SpecMethod",
    "SpecbenchError",
    "StrictModel",
    "Summary",
    "canonical_spec_method",
    "describe_validation_error",
    "describe_yaml_error",
    "ensure_dir",
    "ensure_writable_file",
    "parse_json",
    "parse_yaml",
    "percentile",
    "read_json",
    "read_json_model",
    "read_text",
    "read_yaml",
    "sha256_file",
    "summarize",
    "t_cdf",
    "utc_now",
    "welch",
    "write_bytes",
    "write_text",
]
