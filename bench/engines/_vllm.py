"""vLLM 0.33.0 adapter: ``vllm serve MODEL ...`` with the seed's flags.

Speculative decoding is one ``--speculative-config`` JSON; the draft model is named inside it.
Sources: vllm/config/speculative.py (methods, the qwen3_next_mtp -> mtp rename at :1248),
vllm/entrypoints/common/startup.py:18 (version line), model_loader/default_loader.py:570.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from bench.engines._base import Engine, LogPattern, flag_value, with_flag

if TYPE_CHECKING:
    from bench.schema import Configuration, Experiment

# Method names vLLM 0.33 accepts for MTP; all but "mtp" are rewritten to "mtp" with a warning.
MTP_METHODS = frozenset({"mtp", "qwen3_next_mtp", "qwen3_5_mtp", "deepseek_mtp"})


class VLLM(Engine):
    name = "vllm"
    program = ("vllm", "serve")
    container_port = 8000
    health_path = "/health"
    ready_path = "/v1/models"
    metrics_path = "/metrics"
    # vllm/entrypoints/serve/instrumentator/basic.py:53-56: {"version": VLLM_VERSION}
    version_path = "/version"
    version_regex = r"vLLM server version (\S+?),"
    ready_regex = r"Application startup complete"
    plumbing_flags = ("--host", "--port", "--served-model-name")
    admission_flag = "--max-num-seqs"
    load_patterns = (
        LogPattern(
            code="missing_tensors",
            regex=r"Following weights were not initialized from checkpoint",
            message="weights missing from the checkpoint at load",
            source="vllm/model_executor/model_loader/default_loader.py:570",
        ),
        LogPattern(
            code="mtp_method_renamed",
            regex=r"method `(\w+)` is deprecated and replaced with mtp",
            message="the seed's MTP method name was normalized to mtp (expected)",
            source="vllm/config/speculative.py:1248",
            severity="info",
            speculative_only=True,
        ),
    )

    def model_args(self, model_path: str) -> list[str]:
        return [model_path]

    def plumbing_args(self, experiment: Experiment, host: str, port: int) -> list[str]:
        return ["--host", host, "--port", str(port), "--served-model-name", experiment.served_model]

    def depth_args(self, args: list[str], k: int) -> list[str]:
        """``num_speculative_tokens`` of ``--speculative-config`` set to ``k``."""
        spec = json.loads(flag_value(args, "--speculative-config") or "{}")
        spec["num_speculative_tokens"] = k
        return with_flag(args, "--speculative-config", json.dumps(spec, separators=(",", ":")))

    def spec_problems(self, cfg: Configuration, experiment: Experiment) -> list[str]:
        raw = flag_value(cfg.args, "--speculative-config")
        if cfg.method == "NONE":
            return ["a baseline must not pass --speculative-config"] if raw is not None else []
        if not raw:
            return [f"method {cfg.method} needs --speculative-config"]
        try:
            spec = json.loads(raw)
        except json.JSONDecodeError as err:
            return [f"--speculative-config is not JSON: {err}"]
        if not isinstance(spec, dict):
            return ["--speculative-config must be a JSON object"]
        problems: list[str] = []
        if spec.get("num_speculative_tokens") != cfg.spec_num_tokens:
            problems.append(
                f"--speculative-config num_speculative_tokens {spec.get('num_speculative_tokens')}"
                f" != spec_num_tokens {cfg.spec_num_tokens}"
            )
        method = spec.get("method")
        if cfg.method == "DFLASH":
            draft = experiment.draft_for(cfg)
            if method != "dflash":
                problems.append(f"--speculative-config method {method!r} is not 'dflash'")
            if draft is not None and spec.get("model") != draft.path:
                problems.append(f"--speculative-config model {spec.get('model')!r} != {draft.path}")
        elif cfg.method == "MTP" and method not in MTP_METHODS:
            problems.append(f"--speculative-config method {method!r} is not an MTP method")
        elif cfg.method == "DRAFT_MODEL":
            # vllm/config/speculative.py: method "draft_model" with the drafter's path as model
            draft = experiment.draft_for(cfg)
            if method != "draft_model":
                problems.append(f"--speculative-config method {method!r} is not 'draft_model'")
            if draft is not None and spec.get("model") != draft.path:
                problems.append(f"--speculative-config model {spec.get('model')!r} != {draft.path}")
        elif cfg.method == "NGRAM" and method != "ngram":
            problems.append(f"--speculative-config method {method!r} is not 'ngram'")
        return problems
