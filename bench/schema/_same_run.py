"""One run folder is one run, and two runs compare only on one workload (issue 47, classes 3
and 4): the fields that make two payloads' figures comparable, and a payload against the lock
of the run it is in.

``workload_of`` is what every payload of one folder shares and what ``compare`` holds equal
across hosts (hardware and software may differ between hosts: that is what is compared). The
speculative depth is per configuration: ``lock_findings`` holds it to the lock, and ``compare``
holds each configuration's to the other hosts'.
"""

from __future__ import annotations

from typing import Any

from bench.schema._experiment import UNRESOLVED, Configuration, Experiment
from bench.schema._payload import Payload
from bench.schema._run import RunLock

Finding = tuple[str, str]


def target_of(p: Payload, lock: RunLock | None, config: str | None) -> str:
    """The target a payload measured, as one run's payloads share it: the experiment's target
    where the payload's configuration serves it in another layout (``target_model``, the same
    weights: bench/tinymodel/_qwen35vl.py; lock_findings holds the payload to its layout, and
    the folder check holds the served tensors equal), else the payload's own model."""
    exp = lock.experiment if lock is not None else None
    cfg = next((c for c in exp.configurations if c.name == config), None) if exp else None
    if exp is not None and cfg is not None and cfg.target_model not in (None, exp.target_model):
        return f"{exp.target.hf_id}@{exp.target.revision}"
    return f"{p.hfId}@{p.modelRevision or 'unknown revision'}"


def workload_of(p: Payload, target: str | None = None) -> dict[str, Any]:
    """The workload one payload measured, field by field (None: not stated); ``target``: the
    target as ``target_of`` names it (default: the payload's own model)."""
    wl = p.evidence.workload
    ps, sampling, tpl = wl.prompt_set, wl.sampling, wl.chat_template
    return {
        "target model": target or f"{p.hfId}@{p.modelRevision or 'unknown revision'}",
        "prompt set": f"{ps.name} (sha256 {ps.sha256})" if ps is not None else "synthetic",
        # real text has the length it has (its mean is measured); synthetic prompts are exact
        "prompt tokens": wl.prompt_tokens if ps is None else None,
        "max tokens": wl.max_tokens,
        "temperature": sampling.temperature if sampling is not None else wl.temperature,
        "top_p": sampling.top_p if sampling is not None else None,
        "top_k": sampling.top_k if sampling is not None else None,
        "ignore_eos": sampling.ignore_eos if sampling is not None else wl.ignore_eos,
        "chat template kwargs": dict(tpl.kwargs) if tpl is not None else {},
        "warmup": wl.warmup,
        "iterations": wl.iterations,
    }


def workload_differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """The fields where two workloads differ, in ``workload_of``'s order."""
    return [k for k in a if a[k] != b.get(k)]


def _expected(exp: Experiment, cfg: Configuration) -> dict[str, Any]:
    """What the matrix sends for ``cfg``: greedy, ``ignore_eos``, the experiment's lengths and
    prompt set, ``enable_thinking`` as the experiment says (bench.measure._request)."""
    wl, ps = exp.workload, exp.workload.prompt_set
    thinking = wl.enable_thinking
    return {
        "engine": cfg.engine,
        "method": cfg.method,
        "speculative depth": cfg.spec_num_tokens,
        "target model": exp.target_for(cfg).hf_id,
        "target revision": exp.target_for(cfg).revision,
        "prompt set": ps.name if ps is not None else None,
        "prompt set sha256": _pinned_sha(exp),
        "prompt tokens": wl.prompt_tokens if ps is None else None,
        "max tokens": wl.max_tokens,
        "temperature": 0.0,
        "ignore_eos": True,
        "chat template kwargs": {"enable_thinking": thinking} if thinking is not None else {},
    }


def _pinned_sha(exp: Experiment) -> str | None:
    ps = exp.workload.prompt_set
    if ps is None:
        return None
    sha = ps.sha256 if ps.dataset is None else ps.dataset.sha256
    return None if sha == UNRESOLVED else sha


def _measured(p: Payload) -> dict[str, Any]:
    wl, fl = p.evidence.workload, p.engineFlags
    ps, sampling, tpl = wl.prompt_set, wl.sampling, wl.chat_template
    return {
        "engine": p.engineName,
        "method": fl.specMethod,
        "speculative depth": fl.specNumTokens,
        "target model": p.hfId,
        "target revision": p.modelRevision,
        "prompt set": ps.name if ps is not None else None,
        "prompt set sha256": ps.sha256 if ps is not None else None,
        "prompt tokens": wl.prompt_tokens if ps is None else None,
        "max tokens": wl.max_tokens,
        "temperature": sampling.temperature if sampling is not None else wl.temperature,
        "ignore_eos": sampling.ignore_eos if sampling is not None else wl.ignore_eos,
        "chat template kwargs": dict(tpl.kwargs) if tpl is not None else None,
    }


def lock_findings(p: Payload, lock: RunLock, config: str) -> list[Finding]:
    """Where payload ``p`` of configuration ``config`` measured something else than the run's
    lock says the run measured: each field, with both values."""
    exp = lock.experiment
    cfg = next((c for c in exp.configurations if c.name == config), None)
    if cfg is None:
        return []  # named and refused by the folder check (a configuration the lock lacks)
    want, got = _expected(exp, cfg), _measured(p)
    if want["prompt set sha256"] is None:
        got["prompt set sha256"] = None  # the lock pins none: nothing to hold it to
    if got["target revision"] is None:
        got["target revision"] = want["target revision"]  # not stated: no claim to hold
    if got["chat template kwargs"] is None:
        got["chat template kwargs"] = want["chat template kwargs"]  # payloads before issue 37
    return [
        (key, f"{got[key]!r} in the payload, {want[key]!r} in experiment.lock.json")
        for key in want
        if got[key] != want[key]
    ]
