"""The parts of model files the preflight reads (HF config.json, quantize_config.json, the
DFlash drafter config), and what it reports: findings per checkpoint, a report per run."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bench.core import EngineName, InputError, StrictModel, exists, read_json
from bench.engines.checkpoint_rules import (
    RULES_VERSION,
)

Severity = Literal["error", "warning"]


# -- the parts of the model files we read ------------------------------------------------------


class _ConfigFile(BaseModel):
    """Upstream files carry many keys we do not read: ignore them, but type-check ours strictly
    (a string "false" would be truthy to the engines)."""

    model_config = ConfigDict(extra="ignore", frozen=True, strict=True)


class GPTQConfig(_ConfigFile):
    """quantize_config.json, or config.json's ``quantization_config``, as GPTQ writes it."""

    quant_method: str | None = None
    bits: int | None = None
    group_size: int | None = None
    desc_act: bool | None = None
    sym: bool | None = None
    lm_head: bool = False
    # GPTQModel per-module rules: "+:regex"/"regex" override fields, "-:regex" skips a module.
    dynamic: dict[str, Any] | None = None


class DFlashConfig(_ConfigFile):
    """config.json's ``dflash_config`` of a DFlash drafter."""

    target_layer_ids: list[int] | None = None
    selector_rank: int | None = None
    selector_top_k: int | None = None
    conv_kernel_size: int | None = None
    conv_group_size: int | None = None
    block_size: int | None = None


class TextConfig(_ConfigFile):
    """config.json's ``text_config`` (multimodal wrappers such as Qwen3.5)."""

    num_hidden_layers: int | None = None
    quantization_config: dict[str, Any] | None = None


class HFConfig(_ConfigFile):
    """config.json."""

    architectures: list[str] = Field(default_factory=list)
    model_type: str | None = None
    num_hidden_layers: int | None = None
    quantization_config: dict[str, Any] | None = None
    text_config: TextConfig | None = None
    dflash_config: DFlashConfig | None = None
    target_layer_ids: list[int] | None = None  # top-level fallback both engines read

    @property
    def target_num_layers(self) -> int | None:
        if self.text_config is not None and self.text_config.num_hidden_layers is not None:
            return self.text_config.num_hidden_layers
        return self.num_hidden_layers


# -- findings ----------------------------------------------------------------------------------


class Finding(StrictModel):
    """One rule a checkpoint breaks, with everything needed to act on it."""

    severity: Severity
    checkpoint: str = Field(description="HF id (or folder name) of the checkpoint")
    file: str = Field(description="the file the value comes from")
    field: str = Field(description="dotted key inside that file")
    value: str = Field(description="the value found, JSON-encoded ('<missing>' if absent)")
    engine: EngineName
    engine_version: str = Field(description="the pinned release whose rule this is")
    rule: str
    source: str = Field(description="file:line of the rule in the pinned upstream source")

    @property
    def message(self) -> str:
        return (
            f"{self.severity.upper()} {self.checkpoint}: {self.file} {self.field}={self.value}: "
            f"{self.engine} {self.engine_version}: {self.rule} [{self.source}]"
        )


class CheckedModel(StrictModel):
    """A checkpoint that was examined, and as what."""

    checkpoint: str
    path: str
    role: Literal["target", "draft"]
    engines: list[EngineName]


class CheckReport(StrictModel):
    """What preflight looked at and what it found."""

    experiment: str
    checked: list[CheckedModel] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1


MISSING = "<missing>"


def shown(value: object) -> str:
    return MISSING if value is None else json.dumps(value, sort_keys=True)


class Collector:
    """Builds findings for one checkpoint file with the fixed parts filled in."""

    def __init__(self, checkpoint: str, versions: Mapping[EngineName, str]) -> None:
        self.checkpoint = checkpoint
        self.versions = versions
        self.findings: list[Finding] = []

    def add(
        self,
        severity: Severity,
        engine: EngineName,
        file: Path | str,
        field: str,
        value: object,
        rule: str,
        source: str,
    ) -> None:
        self.findings.append(
            Finding(
                severity=severity,
                checkpoint=self.checkpoint,
                file=str(file),
                field=field,
                value=value if isinstance(value, str) and value == MISSING else shown(value),
                engine=engine,
                engine_version=self.versions.get(engine, RULES_VERSION[engine]),
                rule=rule,
                source=source,
            )
        )


# -- reading -----------------------------------------------------------------------------------


def read_config_json(path: Path) -> Any:
    """A checkpoint's JSON file through the reading layer (a folder, a binary, a document nested
    thousands deep: InputError naming the file, never a RecursionError)."""
    return read_json(path, what="checkpoint file")


def load_configs(
    col: Collector, engines: Iterable[EngineName], path: Path, model: type[_ConfigFile]
) -> Any | None:
    """Parse a JSON file into ``model``; an unreadable file is an error finding per engine."""
    engines = list(engines)
    if not exists(path):
        for eng in engines:
            col.add("error", eng, path, "<file>", MISSING, "file not found", "-")
        return None
    try:
        raw = read_config_json(path)
    except InputError as err:
        for eng in engines:
            col.add("error", eng, path, "<file>", MISSING, f"unreadable: {err.reason}", "-")
        return None
    try:
        return model.model_validate(raw)
    except ValidationError as err:
        first = err.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "<root>"
        for eng in engines:
            col.add("error", eng, path, loc, str(first.get("input")), first["msg"], "-")
        return None
