"""Engine adapters, one module per engine: server argv, the equivalent ``docker run`` line,
health paths, metric names, load-log patterns and the checks of a configuration's flags;
the experiment loader with those checks; the pinned upstream sources (``bench.engines.upstream``).

``get_engine(name).server_argv(cfg, experiment)`` is pure and stable: contract tests feed it to
the pinned upstream argument parsers.
"""

from __future__ import annotations

from bench.engines._base import (
    DEFAULT_MODEL_CACHE,
    LABEL_MANAGED,
    TOKEN_ENV,
    ContainerSpec,
    Engine,
    GraphPatterns,
    LogPattern,
    ResolvedPattern,
    WarmupPatterns,
    flag_value,
    resolved_settings,
)
from bench.engines._cpu_kernel import CPU_KERNEL_REGEX, cpu_kernel_from_log
from bench.engines._experiment import load_experiment, load_pinned_experiment, parse_experiment
from bench.engines._plan import PlanEntry, plan_entries
from bench.engines._registry import engine_names, get_engine
from bench.engines._speculation import (
    SyntheticKnob,
    min_variance_rates,
    speculation_mode,
    synthetic_knob,
)

__all__ = [
    "CPU_KERNEL_REGEX",
    "DEFAULT_MODEL_CACHE",
    "LABEL_MANAGED",
    "TOKEN_ENV",
    "ContainerSpec",
    "Engine",
    "GraphPatterns",
    "LogPattern",
    "PlanEntry",
    "ResolvedPattern",
    "SyntheticKnob",
    "WarmupPatterns",
    "cpu_kernel_from_log",
    "engine_names",
    "flag_value",
    "get_engine",
    "load_experiment",
    "load_pinned_experiment",
    "min_variance_rates",
    "parse_experiment",
    "plan_entries",
    "resolved_settings",
    "speculation_mode",
    "synthetic_knob",
]
