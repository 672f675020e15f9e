"""vLLM 0.33.0 adapter: ``vllm serve MODEL ...`` with the seed's flags.

Speculative decoding is one ``--speculative-config`` JSON; the draft model is named inside it.
Sources: vllm/config/speculative.py (methods, the qwen3_next_mtp -> mtp rename at :1248),
vllm/entrypoints/common/startup.py:18 (version line), model_loader/default_loader.py:570.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Final

from bench.core import InputError, parse_json
from bench.engines._base import (
    Engine,
    GraphPatterns,
    LogPattern,
    ResolvedPattern,
    flag_value,
    with_flag,
)

if TYPE_CHECKING:
    from bench.schema import Configuration, Experiment

# Method names vLLM 0.33 accepts for MTP; all but "mtp" are rewritten to "mtp" with a warning.
MTP_METHODS = frozenset({"mtp", "qwen3_next_mtp", "qwen3_5_mtp", "deepseek_mtp"})


#: specbench method -> the --speculative-config "method" values vLLM takes for it, and whether
#: its "model" must be the experiment's draft path (vllm/config/speculative.py: "dflash" and
#: "draft_model" name a drafter checkpoint; MTP heads live in the target; n-gram needs none)
SPEC_CONFIG_METHODS: Final[dict[str, tuple[frozenset[str], bool]]] = {
    "DFLASH": (frozenset({"dflash"}), True),
    "DRAFT_MODEL": (frozenset({"draft_model"}), True),
    "MTP": (frozenset(MTP_METHODS), False),
    "NGRAM": (frozenset({"ngram"}), False),
}


class VLLM(Engine):
    name = "vllm"
    program = ("vllm", "serve")
    container_port = 8000
    health_path = "/health"
    ready_path = "/v1/models"
    metrics_path = "/metrics"
    # vllm/entrypoints/serve/instrumentator/basic.py:53-56: {"version": VLLM_VERSION}
    version_path = "/version"
    # Two forms: the plain line "vLLM server version X, serving model M" only with
    # VLLM_DISABLE_LOG_LOGO=1 (our CPU image), else an ASCII logo whose row reads "... █  version
    # X", with ANSI colours around the pieces under the "color" formatter
    # (vllm/entrypoints/common/startup.py:16-38 in 0.33.0; serve/utils/api_utils.py:323-343 in
    # 0.26.0, whose GPU server log had only the logo).
    version_regex = (
        r"(?:vLLM server version |█(?:\x1b\[[0-9;]*m)?\s+version\s+(?:\x1b\[[0-9;]*m)?)"
        r"(\d+\.\d+\.\d+(?:[\w.+-]*\w)?)"
    )
    # The engine core's config record (v1/engine/core.py:139-143, "Initializing a V1 LLM engine
    # (v%s) with config: %s"), whose VllmConfig.__str__ writes "tensor_parallel_size=N"
    # (config/vllm.py:2823); the same line in the 0.26.0 GPU and 0.32.0 CPU recordings.
    tensor_parallel_regex = (
        r"Initializing a V1 LLM engine \(v[^)]*\) with config: [^\n]*?\btensor_parallel_size=(\d+)"
    )
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

    # Graphs: both GPU model runners log "Graph capturing finished in %.0f secs, took %.2f GiB"
    # after capture (v1/worker/gpu/model_runner.py:1164, v1/worker/gpu_model_runner.py:6517);
    # --enforce-eager logs "Cudagraph is disabled under eager mode" (config/vllm.py:2005), a
    # NONE cudagraph_mode "Skipping encoder and decoder CUDA graph capture"
    # (v1/worker/gpu/model_runner.py:1095) or, in the V1 runner, "Skipping CUDA graph capture"
    # (v1/worker/gpu_model_runner.py:6420). Per-step use is logged only with
    # --cudagraph-metrics: every stats interval (v1/metrics/loggers.py:343) a table whose rows
    # are "| unpadded | padded | paddings | runtime mode | count |"
    # (compilation/cuda_graph.py:43-49, :104-110, logged at :123; the mode column is
    # str(CUDAGraphMode), its name: config/compilation.py:106).
    graph_patterns = GraphPatterns(
        captured=LogPattern(
            code="cuda_graph_captured",
            regex=r"(Graph capturing) finished in \d+ secs",
            message="CUDA graphs captured at start",
            source="vllm/v1/worker/gpu/model_runner.py:1164",
            severity="info",
        ),
        disabled=(
            LogPattern(
                code="cuda_graph_disabled",
                regex=r"Cudagraph is disabled under eager mode",
                message="the server runs in eager mode",
                source="vllm/config/vllm.py:2005",
                severity="info",
            ),
            LogPattern(
                code="cuda_graph_disabled",
                regex=r"Skipping encoder and decoder CUDA graph capture",
                message="cudagraph_mode NONE: nothing captured",
                source="vllm/v1/worker/gpu/model_runner.py:1095",
                severity="info",
            ),
            LogPattern(
                code="cuda_graph_disabled",
                regex=r"Skipping CUDA graph capture. To turn on CUDA graph capture",
                message="cudagraph_mode NONE: nothing captured (the V1 GPU model runner)",
                source="vllm/v1/worker/gpu_model_runner.py:6420",
                severity="info",
            ),
        ),
        use=LogPattern(
            code="cuda_graph_use",
            regex=r"\|\s*\d+\s*\|\s*\d+\s*\|\s*\d+\s*\|\s*(NONE|PIECEWISE|FULL)\s*\|\s*(\d+)\s*\|",
            message="runtime CUDA graph mode of the steps of one stats interval",
            source="vllm/compilation/cuda_graph.py:110",
            severity="info",
        ),
        used_values=frozenset({"PIECEWISE", "FULL"}),
        baseline_phase="Graph capturing",
        speculative_phase="Graph capturing",
        use_needs_flag="--cudagraph-metrics",
    )
    emulator_passthrough = ("--cudagraph-metrics",)
    #: per-request acceptance (issue 37): the emulator answers as vLLM 0.33.0 does
    #: and the speculative config (issue 48): the emulator emulates its rejection_sample_method
    #: (synthetic, fly) and per-batch-size depth, and logs it as vLLM's non-default args line
    emulator_value_passthrough = ("--per-request-spec-decode-metrics", "--speculative-config")
    # What the engine resolved, from its own log: the attention backend the platform picked
    # (vllm/platforms/cuda.py:509 in 0.33.0, :482 in 0.26.0) and the CUDA-graph mode of the
    # engine config it starts with (v1/engine/core.py:140, compilation_config's repr)
    resolved_patterns = (
        ResolvedPattern(
            "attention_backend",
            r"Using (\w+) attention backend out of potential backends",
            "vllm/platforms/cuda.py:509 (0.33.0)",
        ),
        ResolvedPattern(
            "decode_graphs",
            r"with config: .*?'cudagraph_mode': <CUDAGraphMode\.(\w+)",
            "vllm/v1/engine/core.py:140 (0.33.0): compilation_config.cudagraph_mode",
        ),
    )
    eager_flags = (("--enforce-eager", None),)
    accept_length_pattern = LogPattern(
        code="accept_length",
        regex=r"SpecDecoding metrics: Mean acceptance length: ([0-9.]+),",
        message="vLLM's mean acceptance length over one stats interval",
        source="vllm/v1/spec_decode/metrics.py:120",
        severity="info",
    )

    # VLLM_LOG_STATS_INTERVAL, default 10 s (vllm/envs.py:47 in 0.26.0): the cudagraph table
    # and the SpecDecoding line are logged once per interval (v1/metrics/loggers.py).
    stats_interval_s = 10.0

    def model_args(self, model_path: str) -> list[str]:
        return [model_path]

    def plumbing_args(self, experiment: Experiment, host: str, port: int) -> list[str]:
        return ["--host", host, "--port", str(port), "--served-model-name", experiment.served_model]

    def depth_args(self, args: list[str], k: int) -> list[str]:
        """``num_speculative_tokens`` of ``--speculative-config`` set to ``k``."""
        spec = parse_json(flag_value(args, "--speculative-config") or "{}", "--speculative-config")
        if not isinstance(spec, dict):
            raise InputError("--speculative-config", "must be a JSON object")
        spec["num_speculative_tokens"] = k
        return with_flag(args, "--speculative-config", json.dumps(spec, separators=(",", ":")))

    def spec_problems(self, cfg: Configuration, experiment: Experiment) -> list[str]:
        raw = flag_value(cfg.args, "--speculative-config")
        if cfg.method == "NONE":
            return ["a baseline must not pass --speculative-config"] if raw is not None else []
        if not raw:
            return [f"method {cfg.method} needs --speculative-config"]
        try:
            spec = parse_json(raw, "--speculative-config")
        except InputError as err:
            why = err.reason.removeprefix("cannot read JSON: ")
            return [f"--speculative-config is not JSON: {why}"]
        if not isinstance(spec, dict):
            return ["--speculative-config must be a JSON object"]
        problems: list[str] = []
        if spec.get("num_speculative_tokens") != cfg.spec_num_tokens:
            problems.append(
                f"--speculative-config num_speculative_tokens {spec.get('num_speculative_tokens')}"
                f" != spec_num_tokens {cfg.spec_num_tokens}"
            )
        method = spec.get("method")
        wanted = SPEC_CONFIG_METHODS.get(cfg.method)
        if wanted is not None:
            methods, names_draft = wanted
            if method not in methods:
                problems.append(
                    f"--speculative-config method {method!r} is not "
                    + " or ".join(repr(m) for m in sorted(methods))
                )
            draft = experiment.draft_for(cfg) if names_draft else None
            if draft is not None and spec.get("model") != draft.path:
                problems.append(f"--speculative-config model {spec.get('model')!r} != {draft.path}")
        return problems
