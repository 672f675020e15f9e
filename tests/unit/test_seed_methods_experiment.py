"""bench/experiments/tiny-vllm-cpu-seed.yaml: the seed's vLLM methods on the generated chain
models, engine-checked, with the seed's --speculative-config shapes and the folders that
`specbench tiny-model` writes."""

from __future__ import annotations

import json
from pathlib import Path

from bench.engines import load_experiment
from bench.engines._base import flag_value
from bench.tinymodel import TinyModels, make_tiny_models

EXPERIMENT = "bench/experiments/tiny-vllm-cpu-seed.yaml"


def test_seed_shapes_on_the_generated_models(tmp_path: Path) -> None:
    exp = load_experiment(EXPERIMENT)  # raises on any engine-check problem
    made: TinyModels = make_tiny_models(tmp_path, seed=0)
    mounted = {f"/models/{p.name}" for p in tmp_path.iterdir()}
    assert {m.path for m in exp.models.values()} <= mounted
    assert exp.target.path == f"/models/{made.mtp.path.name}"
    specs = {
        c.name: json.loads(flag_value(c.args, "--speculative-config") or "null")
        for c in exp.configurations
    }
    assert specs == {
        "baseline": None,
        "dflash": {"method": "dflash", "model": "/models/dflash", "num_speculative_tokens": 4},
        "mtp": {"method": "qwen3_next_mtp", "num_speculative_tokens": 2},
    }
    for cfg in exp.configurations:
        assert exp.levels_for(cfg) == [1]
        assert "--no-enable-prefix-caching" in cfg.args
