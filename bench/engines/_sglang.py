"""SGLang 0.5.19 adapter: ``python -m sglang.launch_server --model-path MODEL ...``.

DFLASH with K draft tokens is ``--speculative-num-draft-tokens K+1`` (block = drafts + anchor,
arg_groups/speculative_hook.py); NEXTN (MTP) with K steps and topk 1 drafts K+1 tokens.
The broken-draft detector is the MTP loader's warning (models/qwen3_5_mtp.py:463 in 0.5.19).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bench.engines._base import (
    Engine,
    GraphPatterns,
    LogPattern,
    ResolvedPattern,
    WarmupPatterns,
    flag_value,
    has_flag,
    with_flag,
)

if TYPE_CHECKING:
    from bench.schema import Configuration, Experiment

#: Every ``--speculative-algorithm`` name 0.5.19 starts with: the members of
#: ``SpeculativeAlgorithm`` (sglang/srt/speculative/spec_info.py:32-46; ``from_string``, :48-61,
#: raises "Unknown speculative algorithm name" for any other) less NONE (no speculation), and
#: the CLI alias NEXTN (spec_registry.py:191 ``_RESERVED_ALIASES``; speculative_hook.py:69-77
#: turns it into EAGLE). The contract tier reads both from the pinned source.
SPECULATIVE_ALGORITHMS = frozenset(
    {"DFLASH", "DSPARK", "EAGLE", "EAGLE3", "FROZEN_KV_MTP", "NEXTN", "NGRAM", "STANDALONE"}
)
#: the names that run a target's own MTP head (NEXTN and EAGLE both resolve to EAGLE,
#: speculative_hook.py:69-77); 0.5.19 has no algorithm called MTP
MTP_ALGORITHMS = frozenset({"NEXTN", "EAGLE"})
#: a separate small draft model run autoregressively by the EAGLE worker (speculative/
#: standalone_worker*.py): what vLLM calls draft_model
DRAFT_MODEL_ALGORITHMS = frozenset({"STANDALONE"})


class SGLang(Engine):
    name = "sglang"
    program = ("python3", "-m", "sglang.launch_server")
    container_port = 30000
    health_path = "/health"
    ready_path = "/v1/models"
    metrics_path = "/metrics"
    # sglang/srt/entrypoints/http_server.py:811-834: /server_info carries "version": __version__
    version_path = "/server_info"
    version_regex = r"sglang[ =]v?(\d+\.\d+\.\d+\S*)"
    # entrypoints/engine.py:1098: logger.info(f"server_args={server_args.resolved_dict()}"), a
    # dict repr with "'tp_size': N" (older releases printed ServerArgs(..., tp_size=N, ...)).
    tensor_parallel_regex = r"server_args=[^\n]*?\btp_size'?(?:=|: )(\d+)"
    ready_regex = r"The server is fired up and ready to roll!"
    plumbing_flags = ("--host", "--port", "--served-model-name", "--enable-metrics")
    admission_flag = "--max-running-requests"
    #: adaptive depth (issue 48): the emulator drafts adaptively and logs it in server_args
    emulator_passthrough = ("--speculative-adaptive",)
    # server_args.py (0.5.17/0.5.19): --disable-cuda-graph is a deprecated alias that disables
    # both phases; --cuda-graph-backend-decode disabled is its replacement for decode
    eager_flags = (("--disable-cuda-graph", None), ("--cuda-graph-backend-decode", "disabled"))
    # the Mamba state cache lowers the cap (the seed's five live requests for DFlash)
    # (the scheduler's capacity line, sglang/srt/managers/scheduler.py:1145-1153, states the cap
    # it resolved; the last match wins)
    admission_regexes = (
        r"max_running_requests is capped to (\d+) by the mamba state cache",
        r"max_running_requests=(\d+),",
    )
    load_patterns = (
        LogPattern(
            code="draft_tensors_skipped",
            regex=r"Parameter (\S+) not found in params_dict, skip loading",
            message="draft tensors were skipped at load (the draft runs uninitialised)",
            source="sglang/srt/models/qwen3_5_mtp.py:463 (0.5.19)",
        ),
        LogPattern(
            code="mamba_cap",
            regex=r"max_running_requests is capped to (\d+) by the mamba state cache",
            message="the Mamba state cache lowered max_running_requests",
            source="sglang/srt/mem_cache (resolve_max_num_reqs)",
            severity="info",
        ),
        LogPattern(
            code="deprecated_flag",
            regex=r"'(--[\w-]+)' is deprecated",
            message="a seed flag is a deprecated alias in the pinned release (expected)",
            source="sglang/srt/server_args.py:3920 (0.5.19)",
            severity="info",
        ),
    )

    # Graphs: cuda_graph_setup.py:548-577 logs "Capture {role} {decode|verify} CUDA graph
    # begin/end" per model runner (the target's is "target verify" when speculation is on);
    # metrics_reporter.py:893 ends every decode-batch line with "cuda graph: <bool>", the state of
    # the batch that closed the interval (for speculation, the target-verify forward,
    # eagle_worker_common.py:497 / dflash_worker_v2.py:2100).
    graph_patterns = GraphPatterns(
        captured=LogPattern(
            code="cuda_graph_captured",
            regex=r"Capture (target (?:decode|verify)) CUDA graph end\.",
            message="CUDA graphs captured at start",
            source="sglang/srt/model_executor/model_runner_components/cuda_graph_setup.py:574"
            " (0.5.19)",
            severity="info",
        ),
        disabled=(),
        use=LogPattern(
            code="cuda_graph_use",
            regex=r"Decode batch.*\bcuda graph: (True|False),",
            message="graph state of the decode batch closing each log interval",
            source="sglang/srt/managers/scheduler_components/metrics_reporter.py:893 (0.5.19)",
            severity="info",
        ),
        used_values=frozenset({"True"}),
        baseline_phase="target decode",
        speculative_phase="target verify",
        capture_begin=LogPattern(
            code="cuda_graph_capture_begin",
            regex=r"Capture (target (?:decode|verify|prefill)) CUDA graph begin\.",
            message="a CUDA graph capture began",
            source="sglang/srt/model_executor/model_runner_components/cuda_graph_setup.py:551"
            " (0.5.19)",
            severity="info",
        ),
    )
    # SGLang's HTTP side starts, then its own thread sends GET /model_info and one /generate and
    # only then logs the ready line; /health answers 503 until that request has finished.
    warmup_patterns = WarmupPatterns(
        up=LogPattern(
            code="http_server_up",
            regex=r"Uvicorn running on http",
            message="the HTTP server started (SGLang's warm-up request begins)",
            source="sglang/srt/entrypoints/http_server.py:2386 (0.5.19; uvicorn's startup line)",
            severity="info",
        ),
        done=LogPattern(
            code="warmup_done",
            regex=r"The server is fired up and ready to roll!",
            message="the warm-up request answered",
            source="sglang/srt/entrypoints/http_server.py:2412 (0.5.19)",
            severity="info",
        ),
    )
    # What the server resolved, from its own log (the seed's host may run spec decode eager
    # silently): the server_args line (entrypoints/engine.py; a ServerArgs(...) repr in 0.5.17,
    # a resolved dict in 0.5.19) holds the attention backend and each phase's graph backend;
    # the target's capture line (cuda_graph_setup.py:551 in 0.5.19) the decode one it used.
    resolved_patterns = (
        ResolvedPattern(
            "attention_backend",
            r"server_args=.*?[(,{ ]'?attention_backend'?(?:=|: )'([\w-]+)'",
            "sglang/srt/entrypoints/engine.py (the server_args line)",
        ),
        ResolvedPattern(
            "decode_graphs",
            r"Capture target (?:decode|verify) CUDA graph begin\. backend=(\w+)",
            "sglang/srt/model_executor/model_runner_components/cuda_graph_setup.py:551 (0.5.19)",
        ),
        ResolvedPattern(
            "decode_graphs",
            r"server_args=.*?\bdecode=PhaseConfig\(backend='(\w+)'",
            "sglang/srt/entrypoints/engine.py (the server_args line: cuda_graph_config)",
        ),
        ResolvedPattern(
            "prefill_graphs",
            r"Capture target prefill CUDA graph begin\. backend=(\w+)",
            "sglang/srt/model_executor/model_runner_components/cuda_graph_setup.py (prefill)",
        ),
        ResolvedPattern(
            "prefill_graphs",
            r"server_args=.*?\bprefill=PhaseConfig\(backend='(\w+)'",
            "sglang/srt/entrypoints/engine.py (the server_args line: cuda_graph_config)",
        ),
    )
    accept_length_pattern = LogPattern(
        code="accept_length",
        regex=r"Decode batch.*?, accept len: ([0-9.]+),",
        message="SGLang's acceptance length over one decode-log interval",
        source="sglang/srt/managers/scheduler_components/metrics_reporter.py:859 (0.5.19)",
        severity="info",
    )

    def model_args(self, model_path: str) -> list[str]:
        return ["--model-path", model_path]

    def plumbing_args(self, experiment: Experiment, host: str, port: int) -> list[str]:
        return [
            "--host",
            host,
            "--port",
            str(port),
            "--served-model-name",
            experiment.served_model,
            "--enable-metrics",
        ]

    def depth_args(self, args: list[str], k: int) -> list[str]:
        """k draft tokens = a block of k+1 (``--speculative-num-draft-tokens``; the anchor token
        counts); MTP also chains k steps (``--speculative-num-steps``)."""
        out = with_flag(args, "--speculative-num-draft-tokens", str(k + 1))
        if flag_value(out, "--speculative-num-steps") is not None:
            out = with_flag(out, "--speculative-num-steps", str(k))
        return out

    def spec_problems(self, cfg: Configuration, experiment: Experiment) -> list[str]:
        algo = flag_value(cfg.args, "--speculative-algorithm")
        if cfg.method == "NONE":
            spec = [f for f in has_flag(cfg.args, "--speculative-") if f]
            return [f"a baseline must not pass {spec[0]}"] if spec else []
        k = cfg.spec_num_tokens or 0
        problems: list[str] = []
        if algo is not None and algo not in SPECULATIVE_ALGORITHMS:
            known = ", ".join(sorted(SPECULATIVE_ALGORITHMS))
            problems.append(
                f"--speculative-algorithm {algo!r} is not an algorithm SGLang 0.5.19 accepts "
                f"(the server would stop at start: {known})"
            )
        draft_tokens = flag_value(cfg.args, "--speculative-num-draft-tokens")
        if draft_tokens != str(k + 1):
            problems.append(
                f"--speculative-num-draft-tokens {draft_tokens} != spec_num_tokens+1 ({k + 1})"
            )
        if cfg.method == "DFLASH":
            if algo != "DFLASH":
                problems.append(f"--speculative-algorithm {algo!r} is not DFLASH")
            draft = experiment.draft_for(cfg)
            path = flag_value(cfg.args, "--speculative-draft-model-path")
            if draft is not None and path != draft.path:
                problems.append(f"--speculative-draft-model-path {path!r} != {draft.path}")
        elif cfg.method in ("MTP", "DRAFT_MODEL"):
            wanted = MTP_ALGORITHMS if cfg.method == "MTP" else DRAFT_MODEL_ALGORITHMS
            if algo not in wanted:
                problems.append(
                    f"--speculative-algorithm {algo!r} is not one of {sorted(wanted)} "
                    f"({cfg.method})"
                )
            steps = flag_value(cfg.args, "--speculative-num-steps")
            if steps != str(k):
                problems.append(f"--speculative-num-steps {steps} != spec_num_tokens ({k})")
            draft = experiment.draft_for(cfg) if cfg.method == "DRAFT_MODEL" else None
            path = flag_value(cfg.args, "--speculative-draft-model-path")
            if draft is not None and path != draft.path:
                problems.append(f"--speculative-draft-model-path {path!r} != {draft.path}")
        else:
            problems.append(f"method {cfg.method} is not wired for SGLang in specbench")
        return problems
