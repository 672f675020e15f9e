"""Experiments with their engine checks: the schema validates the document, each engine checks
that its configurations' flags agree with method, tokens and draft path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.core import InputError
from bench.engines._registry import get_engine
from bench.schema import Experiment, parse_experiment_document, read_experiment_document


def parse_experiment(data: Any, source: str) -> Experiment:
    """Validate a parsed experiment document, then every configuration against its engine."""
    exp = parse_experiment_document(data, source)
    for i, cfg in enumerate(exp.configurations):
        problems = get_engine(cfg.engine).check(cfg, exp)
        if problems:
            raise InputError(f"{source}: configurations.{i}.args", problems[0])
    return exp


def load_experiment(path: Path | str) -> Experiment:
    """Read and validate an experiment file (YAML). Exit 2 with the field on any problem."""
    data, source = read_experiment_document(path)
    return parse_experiment(data, source)
