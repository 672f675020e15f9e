"""Measuring one endpoint over HTTP, the same way for every engine: the raw client,
exact-P prompts, the measured I/O loop, acceptance from counters, aggregation, and every
validity rule.
"""

from __future__ import annotations

from bench.measure._acceptance import (
    METRICS,
    SGLANG_GAUGES,
    VLLM_DRAFTS,
    build,
    combine,
    delta,
    parse_prometheus,
    snapshot,
)
from bench.measure._accuracy import (
    AccuracyTask,
    accuracy_task_file,
    answer_task,
    read_accuracy_task,
)
from bench.measure._client import (
    Connection,
    RawResponse,
    chat_body,
    interpret_chat_stream,
    request,
    split_base_url,
)
from bench.measure._loop import Measured, measure, measure_level, probe_level
from bench.measure._probes import MAX_PROBES
from bench.measure._progress import ProgressBar
from bench.measure._promptset import (
    PromptSet,
    dataset_file,
    experiment_prompt_set,
    read_prompt_set,
)
from bench.measure._runspec import RunSpec
from bench.measure._validity import (
    GraphCheck,
    accept_lengths,
    graph_check,
    judge,
    scan_log,
    throttle_warnings,
    why_not_ready,
)
from bench.measure._workload import (
    NONCE_PREFIX,
    WORDS,
    PromptFactory,
    find_cached_tokenizer,
    load_tokenizer,
    nonce_stream,
    prompt_sha256,
)

__all__ = [
    "MAX_PROBES",
    "METRICS",
    "NONCE_PREFIX",
    "SGLANG_GAUGES",
    "VLLM_DRAFTS",
    "WORDS",
    "AccuracyTask",
    "Connection",
    "GraphCheck",
    "Measured",
    "ProgressBar",
    "PromptFactory",
    "PromptSet",
    "RawResponse",
    "RunSpec",
    "accept_lengths",
    "accuracy_task_file",
    "answer_task",
    "build",
    "chat_body",
    "combine",
    "dataset_file",
    "delta",
    "experiment_prompt_set",
    "find_cached_tokenizer",
    "graph_check",
    "interpret_chat_stream",
    "judge",
    "load_tokenizer",
    "measure",
    "measure_level",
    "nonce_stream",
    "parse_prometheus",
    "probe_level",
    "prompt_sha256",
    "read_accuracy_task",
    "read_prompt_set",
    "request",
    "scan_log",
    "snapshot",
    "split_base_url",
    "throttle_warnings",
    "why_not_ready",
]
