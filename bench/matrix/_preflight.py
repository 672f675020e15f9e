"""Preflight checks of the model files against the pinned engines' own rules.

Some failures can only be told from the checkpoints themselves: a GPTQ config the pinned vLLM
refuses (desc_act with groups, asymmetric or odd group sizes), a drafter architecture the pinned
engine does not register, or a DFlash drafter config missing the keys that, when absent, make an
engine crash at load (``selector_rank``) or silently draft from the wrong target layers
(``target_layer_ids``). Each rule below is a fact of the pinned release, cited as
``file:line`` in its source; tests/contract/test_checkpoint_rules.py re-reads those files and
fails when a constant here no longer matches.

``check_checkpoint`` checks one target (and optionally one drafter) directory;
``check_models_dir`` checks every model of an experiment in a host model cache laid out as the
containers see it (``<models-dir>/<basename of the model's /models/... path>``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from bench.core import EngineName, InputError
from bench.engines.checkpoint_rules import (
    DFLASH2_ARCH,
    RULES_VERSION,
    SGLANG_DFLASH_DRAFT_ARCHS,
    SGLANG_GPTQ_BITS,
    SGLANG_GPTQ_MARLIN_TYPES,
    SGLANG_MARLIN_GROUP_SIZES,
    SRC_SGLANG_BITS,
    SRC_SGLANG_CONV,
    SRC_SGLANG_LAYER_IDS,
    SRC_SGLANG_MARLIN,
    SRC_SGLANG_QUANT_SOURCE,
    SRC_SGLANG_REGISTRY,
    SRC_SGLANG_SELECTOR,
    SRC_VLLM_DESC_ACT,
    SRC_VLLM_DFLASH2_KEYS,
    SRC_VLLM_DYNAMIC,
    SRC_VLLM_KEYS,
    SRC_VLLM_LAYER_IDS,
    SRC_VLLM_MARLIN,
    SRC_VLLM_QUANT_SOURCE,
    SRC_VLLM_REGISTRY,
    SRC_VLLM_TYPES,
    VLLM_DFLASH2_REQUIRED_KEYS,
    VLLM_DFLASH_DRAFT_ARCHS,
    VLLM_GPTQ_REQUIRED_KEYS,
    VLLM_GPTQ_TYPES,
    VLLM_MARLIN_GROUP_SIZES,
    vllm_dflash_arch,
)
from bench.matrix._checkpoint_files import (
    MISSING,
    CheckedModel,
    CheckReport,
    Collector,
    DFlashConfig,
    Finding,
    GPTQConfig,
    HFConfig,
    load_configs,
    read_config_json,
    shown,
)
from bench.schema import Experiment

# -- target: GPTQ rules ------------------------------------------------------------------------


def _uses_flag(experiment: Experiment, engine: EngineName, flag: str) -> bool:
    return any(
        flag in cfg.args or any(a.startswith(flag + "=") for a in cfg.args)
        for cfg in experiment.configurations
        if cfg.engine == engine
    )


def _quant_source(
    cfg: HFConfig, target_dir: Path, engine: EngineName, experiment: Experiment
) -> tuple[dict[str, Any] | None, Path, str]:
    """Where the engine takes the quantization config from, as (dict, file, key prefix)."""
    config_json = target_dir / "config.json"
    if cfg.quantization_config is not None:
        return cfg.quantization_config, config_json, "quantization_config."
    # vLLM also looks in text_config (model_arch_config_convertor.py:285-292); SGLang does not.
    if engine == "vllm" and cfg.text_config and cfg.text_config.quantization_config is not None:
        return cfg.text_config.quantization_config, config_json, "text_config.quantization_config."
    qfile = target_dir / "quantize_config.json"
    if qfile.is_file() and _uses_flag(experiment, engine, "--quantization"):
        try:
            return read_config_json(qfile), qfile, ""
        except InputError as err:
            return f"unreadable: {err.reason}", qfile, ""  # type: ignore[return-value]  # fails validation
    return None, config_json, "quantization_config."


def _check_vllm_gptq(col: Collector, q: GPTQConfig, file: Path, pre: str) -> None:
    missing = [k for k in VLLM_GPTQ_REQUIRED_KEYS if getattr(q, k) is None]
    for key in missing:
        col.add(
            "error", "vllm", file, pre + key, MISSING,
            f"AutoGPTQConfig.from_config requires '{key}'", SRC_VLLM_KEYS,
        )  # fmt: skip
    if missing:
        return
    assert q.bits is not None and q.sym is not None and q.group_size is not None
    if q.desc_act and q.group_size != -1:
        col.add(
            "error", "vllm", file, pre + "desc_act", q.desc_act,
            f"GPTQ group activation ordering (desc_act=true with group_size={q.group_size}) "
            "is refused since vLLM 0.30; use a checkpoint with desc_act=false "
            "(or static activation ordering)", SRC_VLLM_DESC_ACT,
        )  # fmt: skip
    if (q.bits, q.sym) not in VLLM_GPTQ_TYPES:
        field = "sym" if not q.sym else "bits"
        col.add(
            "error", "vllm", file, pre + field, getattr(q, field),
            f"unsupported GPTQ config bits={q.bits}, sym={str(q.sym).lower()}: only symmetric "
            "4- or 8-bit GPTQ is accepted", SRC_VLLM_TYPES,
        )  # fmt: skip
    if q.group_size not in VLLM_MARLIN_GROUP_SIZES:
        col.add(
            "error", "vllm", file, pre + "group_size", q.group_size,
            f"Marlin does not support group_size={q.group_size} "
            f"(supported: {list(VLLM_MARLIN_GROUP_SIZES)})", SRC_VLLM_MARLIN,
        )  # fmt: skip
    _check_vllm_dynamic(col, q, file, pre)


def _check_vllm_dynamic(col: Collector, q: GPTQConfig, file: Path, pre: str) -> None:
    """Per-module overrides get the same rules; '-:' rules skip quantization and are exempt."""
    for pattern, overrides in (q.dynamic or {}).items():
        if pattern.startswith("-:") or not isinstance(overrides, Mapping):
            continue
        field = f"{pre}dynamic[{json.dumps(pattern)}]"
        desc_act = overrides.get("desc_act", q.desc_act)
        group = overrides.get("group_size", q.group_size)
        bits = overrides.get("bits", q.bits)
        sym = overrides.get("sym", q.sym)
        if desc_act and group != -1:
            col.add(
                "error", "vllm", file, field + ".desc_act", desc_act,
                f"dynamic rule {pattern!r} enables GPTQ group activation ordering "
                f"(group_size={group}), refused since vLLM 0.30", SRC_VLLM_DESC_ACT,
            )  # fmt: skip
        if (bits, sym) not in VLLM_GPTQ_TYPES:
            col.add(
                "error", "vllm", file, field, dict(overrides),
                f"dynamic rule {pattern!r} gives bits={bits}, sym={sym}: only symmetric "
                "4- or 8-bit GPTQ is accepted", SRC_VLLM_DYNAMIC,
            )  # fmt: skip
        if group not in VLLM_MARLIN_GROUP_SIZES:
            col.add(
                "error", "vllm", file, field + ".group_size", group,
                f"dynamic rule {pattern!r}: Marlin does not support group_size={group}",
                SRC_VLLM_MARLIN,
            )  # fmt: skip


def _check_sglang_gptq(col: Collector, q: GPTQConfig, file: Path, pre: str) -> None:
    if q.bits is not None and q.bits not in SGLANG_GPTQ_BITS:
        col.add(
            "error", "sglang", file, pre + "bits", q.bits,
            f"GPTQ supports only {list(SGLANG_GPTQ_BITS)}-bit weights", SRC_SGLANG_BITS,
        )  # fmt: skip
        return
    fields = {"bits": q.bits, "group_size": q.group_size, "sym": q.sym, "desc_act": q.desc_act}
    missing = [k for k, v in fields.items() if v is None]
    if missing:
        reason = f"missing {', '.join(missing)}"
    elif (q.bits, q.sym) not in SGLANG_GPTQ_MARLIN_TYPES:
        reason = f"bits={q.bits}, sym={str(q.sym).lower()} is not symmetric 4/8-bit"
    elif q.group_size not in SGLANG_MARLIN_GROUP_SIZES:
        reason = f"group_size={q.group_size} not in {list(SGLANG_MARLIN_GROUP_SIZES)}"
    else:
        return
    field = missing[0] if missing else ("sym" if not q.sym else "group_size")
    col.add(
        "warning", "sglang", file, pre + field, fields.get(field),
        f"not convertible to gptq_marlin ({reason}): SGLang falls back to the plain gptq "
        "kernel (fp16 activations only, much slower), so figures are not comparable",
        SRC_SGLANG_MARLIN,
    )  # fmt: skip


def check_target(
    target_dir: Path,
    checkpoint: str,
    engines: Iterable[EngineName],
    experiment: Experiment,
    versions: Mapping[EngineName, str],
) -> list[Finding]:
    """The target checkpoint's quantization config against each engine that serves it."""
    engines = sorted(set(engines))
    col = Collector(checkpoint, versions)
    cfg = load_configs(col, engines, target_dir / "config.json", HFConfig)
    if cfg is None:
        return col.findings
    want_gptq = experiment.quantization.lower().startswith("gptq")
    for eng in engines:
        raw, file, pre = _quant_source(cfg, target_dir, eng, experiment)
        src = SRC_VLLM_QUANT_SOURCE if eng == "vllm" else SRC_SGLANG_QUANT_SOURCE
        if raw is None:
            if want_gptq:
                extra = " (quantize_config.json is read only with --quantization)"
                col.add(
                    "error", eng, file, pre.rstrip("."), MISSING,
                    f"the experiment says {experiment.quantization} but the engine finds no "
                    f"quantization config, so it would load the weights unquantized{extra}", src,
                )  # fmt: skip
            continue
        try:
            q = GPTQConfig.model_validate(raw)
        except ValidationError as err:
            first = err.errors()[0]
            loc = ".".join(str(p) for p in first["loc"])
            col.add("error", eng, file, pre + loc, str(first.get("input")), first["msg"], src)
            continue
        method = (q.quant_method or "").lower()
        if method != "gptq":
            if want_gptq:
                col.add(
                    "error", eng, file, pre + "quant_method", q.quant_method,
                    f"the experiment says {experiment.quantization}; the GPTQ path is taken "
                    "only for quant_method 'gptq'", src,
                )  # fmt: skip
            continue
        if eng == "vllm":
            _check_vllm_gptq(col, q, file, pre)
        else:
            _check_sglang_gptq(col, q, file, pre)
    return col.findings


# -- drafter: registry and DFlash config -------------------------------------------------------


def _resolved_arch(cfg: HFConfig, engine: EngineName) -> str | None:
    """First architecture the engine registers as a DFlash drafter (engines take the first)."""
    for arch in cfg.architectures:
        name = vllm_dflash_arch(arch) if engine == "vllm" else arch
        registered = VLLM_DFLASH_DRAFT_ARCHS if engine == "vllm" else SGLANG_DFLASH_DRAFT_ARCHS
        if name in registered:
            return name
    return None


def check_draft(
    draft_dir: Path,
    checkpoint: str,
    engines: Iterable[EngineName],
    versions: Mapping[EngineName, str],
    target_num_layers: int | None = None,
) -> list[Finding]:
    """A DFlash drafter's architecture and dflash_config against each engine that loads it."""
    engines = sorted(set(engines))
    col = Collector(checkpoint, versions)
    file = draft_dir / "config.json"
    cfg = load_configs(col, engines, file, HFConfig)
    if cfg is None:
        return col.findings
    dcfg = cfg.dflash_config or DFlashConfig()
    for eng in engines:
        arch = _resolved_arch(cfg, eng)
        if arch is None:
            known = sorted(VLLM_DFLASH_DRAFT_ARCHS if eng == "vllm" else SGLANG_DFLASH_DRAFT_ARCHS)
            col.add(
                "error", eng, file, "architectures", cfg.architectures or MISSING,
                f"no DFlash drafter architecture registered by this release (registered: "
                f"{', '.join(known)})",
                SRC_VLLM_REGISTRY if eng == "vllm" else SRC_SGLANG_REGISTRY,
            )  # fmt: skip
            continue
        _check_layer_ids(col, eng, file, cfg, dcfg, target_num_layers)
        if arch == DFLASH2_ARCH:
            _check_dflash2_keys(col, eng, file, dcfg)
    return col.findings


def _check_layer_ids(
    col: Collector,
    eng: EngineName,
    file: Path,
    cfg: HFConfig,
    dcfg: DFlashConfig,
    target_num_layers: int | None,
) -> None:
    ids = dcfg.target_layer_ids if dcfg.target_layer_ids is not None else cfg.target_layer_ids
    src = SRC_VLLM_LAYER_IDS if eng == "vllm" else SRC_SGLANG_LAYER_IDS
    field = "dflash_config.target_layer_ids"
    if ids is None:
        col.add(
            "error", eng, file, field, MISSING,
            "without target_layer_ids the engine silently picks default target layers, "
            "not the ones the drafter was trained on, and acceptance collapses "
            "(sgl-project/sglang#37475)", src,
        )  # fmt: skip
    elif not ids:
        col.add("error", eng, file, field, ids, "target_layer_ids must be non-empty", src)
    elif target_num_layers is not None and any(i < 0 or i >= target_num_layers for i in ids):
        col.add(
            "error", eng, file, field, ids,
            f"layer ids out of range for a target with {target_num_layers} layers", src,
        )  # fmt: skip


def _check_dflash2_keys(col: Collector, eng: EngineName, file: Path, dcfg: DFlashConfig) -> None:
    if eng == "vllm":
        for key in VLLM_DFLASH2_REQUIRED_KEYS:
            if getattr(dcfg, key) is None:
                col.add(
                    "error", eng, file, f"dflash_config.{key}", MISSING,
                    f"DFlash2 reads dflash_config['{key}'] unconditionally: load fails",
                    SRC_VLLM_DFLASH2_KEYS,
                )  # fmt: skip
        return
    if not dcfg.selector_rank:
        col.add(
            "error", eng, file, "dflash_config.selector_rank", dcfg.selector_rank,
            "DFlash2DraftModel requires dflash_config.selector_rank: load fails",
            SRC_SGLANG_SELECTOR,
        )  # fmt: skip
    elif not dcfg.selector_top_k:
        col.add(
            "error", eng, file, "dflash_config.selector_top_k", dcfg.selector_top_k,
            "the selector needs rank and top_k together", SRC_SGLANG_SELECTOR,
        )  # fmt: skip
    if bool(dcfg.conv_kernel_size) != bool(dcfg.conv_group_size):
        field = "conv_group_size" if dcfg.conv_kernel_size else "conv_kernel_size"
        col.add(
            "error", eng, file, f"dflash_config.{field}", getattr(dcfg, field),
            "the grouped convolution needs conv_kernel_size and conv_group_size together",
            SRC_SGLANG_CONV,
        )  # fmt: skip


# -- whole experiment --------------------------------------------------------------------------


def pinned_versions(experiment: Experiment) -> dict[EngineName, str]:
    """The engine version the experiment pins, per engine (first image of each engine)."""
    out: dict[EngineName, str] = {}
    for img in experiment.images.values():
        out.setdefault(img.engine, img.version)
    return out


def _version_findings(experiment: Experiment) -> list[Finding]:
    """Rules read from one release may not hold for another: say so, once per image."""
    out: list[Finding] = []
    for key, img in experiment.images.items():
        want = RULES_VERSION[img.engine]
        if img.version != want:
            out.append(
                Finding(
                    severity="warning",
                    checkpoint=experiment.name,
                    file="experiment",
                    field=f"images.{key}.version",
                    value=shown(img.version),
                    engine=img.engine,
                    engine_version=img.version,
                    rule=f"preflight rules were read from {img.engine} {want}; re-verify them",
                    source="bench/engines/checkpoint_rules.py RULES_VERSION",
                )
            )
    return out


def _engines(experiment: Experiment, draft_key: str | None = None) -> list[EngineName]:
    cfgs = experiment.configurations
    if draft_key is not None:
        cfgs = [c for c in cfgs if c.draft_model == draft_key]
    return sorted({c.engine for c in cfgs})


def _target_layers(target_dir: Path) -> int | None:
    try:
        return HFConfig.model_validate(
            read_config_json(target_dir / "config.json")
        ).target_num_layers
    except (InputError, ValueError):
        return None


def _targets(experiment: Experiment) -> dict[str, list[EngineName]]:
    """Each target key a configuration serves, with the engines that serve it."""
    out: dict[str, set[EngineName]] = {}
    for c in experiment.configurations:
        out.setdefault(experiment.target_key_for(c), set()).add(c.engine)
    return {key: sorted(engines) for key, engines in out.items()}


def _check(
    experiment: Experiment,
    targets: list[tuple[str, Path, list[EngineName]]],
    drafts: list[tuple[str, Path, list[EngineName]]],
) -> CheckReport:
    """``targets`` and ``drafts``: (checkpoint name, folder, the engines that serve it)."""
    versions = pinned_versions(experiment)
    checked: list[CheckedModel] = []
    findings = _version_findings(experiment)
    for name, tdir, t_engines in targets:
        checked.append(
            CheckedModel(checkpoint=name, path=str(tdir), role="target", engines=t_engines)
        )
        findings += check_target(tdir, name, t_engines, experiment, versions)
    layers = _target_layers(targets[0][1])
    for name, ddir, engines in drafts:
        checked.append(CheckedModel(checkpoint=name, path=str(ddir), role="draft", engines=engines))
        findings += check_draft(ddir, name, engines, versions, layers)
    return CheckReport(experiment=experiment.name, checked=checked, findings=findings)


def check_checkpoint(
    target_dir: Path, draft_dir: Path | None, experiment: Experiment
) -> CheckReport:
    """Check a target checkpoint folder and, if given, a DFlash drafter folder.

    The target is checked for every engine the experiment runs; the drafter for every engine
    that runs a configuration with a draft model."""
    drafts: list[tuple[str, Path, list[EngineName]]] = []
    if draft_dir is not None:
        keys = sorted({c.draft_model for c in experiment.configurations if c.draft_model})
        name = experiment.models[keys[0]].hf_id if len(keys) == 1 else draft_dir.name
        engines = sorted({c.engine for c in experiment.configurations if c.draft_model})
        drafts.append((name, draft_dir, engines))
    return _check(experiment, [(experiment.target.hf_id, target_dir, _engines(experiment))], drafts)


def check_models_dir(experiment: Experiment, models_dir: Path) -> CheckReport:
    """Check every model of the experiment in a host model cache (the folder mounted at
    /models in the containers): the target, and each drafter a configuration uses."""
    if not models_dir.is_dir():
        raise InputError(str(models_dir), "models directory not found")
    drafts = [
        (pin.hf_id, models_dir / pin.dirname, _engines(experiment, key))
        for key, pin in sorted(experiment.models.items())
        if any(c.draft_model == key for c in experiment.configurations)
    ]
    targets = [
        (experiment.models[key].hf_id, models_dir / experiment.models[key].dirname, engines)
        for key, engines in _targets(experiment).items()
    ]
    return _check(experiment, targets, drafts)


def render_text(report: CheckReport) -> str:
    """One line per finding, then a summary line."""
    lines = [f.message for f in report.findings]
    for m in report.checked:
        lines.append(f"checked {m.role} {m.checkpoint} ({m.path}) for {', '.join(m.engines)}")
    n_err = len(report.errors)
    n_warn = len(report.findings) - n_err
    verdict = "OK" if report.ok else "FAILED"
    lines.append(f"preflight {verdict}: {n_err} error(s), {n_warn} warning(s)")
    return "\n".join(lines)
