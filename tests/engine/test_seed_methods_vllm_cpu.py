"""The seed's two vLLM methods on vLLM's CPU build, with the seed's own --speculative-config
shapes and answers known before the server starts (bench/tinymodel/_chain.py):

- DFlash, ``{"method":"dflash","model":...,"num_speculative_tokens":4}``: the chain target
  (``t -> sigma(t)``) and a DFlash draft that predicts ``sigma`` of its block's real token at
  every slot. Draft token 1 is always right, tokens 2-4 always wrong (``sigma`` has no fixed
  point): accepted per position exactly ``[drafts, 0, 0, 0]``, acceptance 1/4, mean
  acceptance length 2.
- MTP, ``{"method":"qwen3_next_mtp","num_speculative_tokens":2}``: a Qwen3-Next chain target
  (Gated DeltaNet + gated attention + sparse MoE, the hybrid family of the seed's target) whose
  MTP layer predicts the chain's next token exactly: acceptance 1.0, length 3, and vLLM logs
  the rename of the seed's method name to ``mtp``.
- Greedy output of both equals the chain the target alone produces (worked out here from the
  tokenizer and ``sigma``, token for token): speculation changes nothing.

One server start per method (concurrency 1; the `specbench run` window of engine_server.py).
"""

from __future__ import annotations

import itertools
import json
import shutil
import time
from typing import Any

import engine_server as es
import jinja2
import pytest
from conftest import EngineRuns
from engine_server import GREEDY_PROMPTS, GREEDY_TOKENS, SEED_K, P, per_position
from merged_streams import cli_timed
from tokenizers import Tokenizer

from bench.engines import get_engine
from bench.measure import scan_log
from bench.tinymodel import CHAT_TEMPLATE, TinyModels

ACCEPTANCE = {"dflash": 1 / SEED_K["dflash"], "mtp": 1.0}  # what the construction implies
ARCHITECTURE = {"dflash": "DFlashDraftModel", "mtp": "Qwen3NextMTP"}


def chain_text(models: TinyModels, prompt: str, tokens: int) -> str:
    """The greedy completion the chain target produces: sigma applied to the prompt's last
    token, ``tokens`` times, decoded (the chat template rendered as the server renders it)."""
    tok = Tokenizer.from_file(str(models.chain.path / "tokenizer.json"))
    messages = [{"role": "user", "content": prompt}]
    text = (
        jinja2.Environment()
        .from_string(CHAT_TEMPLATE)
        .render(messages=messages, add_generation_prompt=True)
    )
    t, out = tok.encode(text, add_special_tokens=False).ids[-1], []
    for _ in range(tokens):
        t = models.chain_next[t]
        out.append(t)
    return str(tok.decode(out))


@pytest.mark.parametrize("config", ["dflash", "mtp"])
def test_seed_shape_serves_and_loads_the_method(engine_runs: EngineRuns, config: str) -> None:
    run = engine_runs[config]
    spec = json.loads(run.argv[run.argv.index("--speculative-config") + 1])
    assert spec["num_speculative_tokens"] == SEED_K[config]
    assert run.start_to_health_s > 0
    assert f"Resolved architecture: {ARCHITECTURE[config]}" in run.startup_log
    findings = {f.code for f in scan_log(run.startup_log, get_engine("vllm").load_patterns, True)}
    assert "missing_tensors" not in findings
    if config == "mtp":
        assert spec == {"method": "qwen3_next_mtp", "num_speculative_tokens": 2}
        assert "method `qwen3_next_mtp` is deprecated and replaced with mtp." in run.startup_log
        assert "mtp_method_renamed" in findings
    else:
        assert spec == {"method": "dflash", "model": "/models/dflash", "num_speculative_tokens": 4}
    cli_timed(run.payload, config)  # valid, or untimed by load alone (merged_streams.py)


@pytest.mark.parametrize("config", ["dflash", "mtp"])
def test_acceptance_is_what_the_construction_implies(engine_runs: EngineRuns, config: str) -> None:
    run, k = engine_runs[config], SEED_K[config]
    windows = run.measured_windows()
    assert windows
    for it in windows:
        acc = it["acceptance"]
        drafts = acc["drafts"]
        assert drafts > 0 and acc["draft_tokens"] == k * drafts  # the counters moved
        expected = [drafts] * k if config == "mtp" else [drafts] + [0] * (k - 1)
        assert acc["accepted_per_position"] == expected
        assert acc["acceptance_rate"] == pytest.approx(ACCEPTANCE[config], abs=1e-12)
        assert acc["mean_acceptance_length"] == pytest.approx(1 + ACCEPTANCE[config] * k)
        assert all(a >= b for a, b in itertools.pairwise(acc["accepted_per_position"]))
    totals = per_position(run.metric_values)  # the engine's own counters since start
    assert len(totals) == k and totals[0] > 0
    assert totals == ([totals[0]] * k if config == "mtp" else [totals[0]] + [0.0] * (k - 1))
    requests = [r for it in run.payload["evidence"]["iterations"] for r in it["requests"]]
    assert {r["prompt_tokens"] for r in requests} == {P}


@pytest.mark.parametrize("config", ["dflash", "mtp"])
def test_greedy_output_is_the_targets_own(
    engine_runs: EngineRuns, tiny_models: TinyModels, config: str
) -> None:
    run = engine_runs[config]
    for prompt, done in zip(GREEDY_PROMPTS, run.greedy, strict=True):
        assert done.usage["completion_tokens"] == GREEDY_TOKENS
        assert done.text == chain_text(tiny_models, prompt, GREEDY_TOKENS)


def test_dflash2_draft_is_refused_on_the_cpu_build(
    docker_client: Any,
    vllm_cpu_image: str,
    tiny_models: TinyModels,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The seed's drafter is a ``DFlash2DraftModel`` (z-lab/Qwen3.8-27B-DFlash2, pins.md).
    DFlash2's candidate head runs only on Model Runner V2 (vllm/config/vllm.py:741-754,
    :2988-2991 in 0.32.0), V2 needs Triton (:723-727) and the CPU build has none: vLLM refuses
    at config time, before any weight is read. So the draft here is the DFlash draft's config
    with DFlash2's architecture name, and DFlash2 runs on a GPU only."""
    folder = tmp_path_factory.mktemp("dflash2")
    shutil.copytree(tiny_models.chain.path, folder / "chain")
    (folder / "dflash2").mkdir()
    config = json.loads((tiny_models.dflash.path / "config.json").read_text())
    config["architectures"] = ["DFlash2DraftModel"]
    (folder / "dflash2" / "config.json").write_text(json.dumps(config))
    for path in (folder, *folder.iterdir()):
        path.chmod(0o755)
    started = time.monotonic()
    with pytest.raises(RuntimeError) as refused:
        es.start_server(docker_client, "dflash2", folder)
    print(f"\nDFlash2 refused after {time.monotonic() - started:.0f} s")
    assert "Model Runner V2 requires Triton; using the V1 model runner instead." in str(
        refused.value
    )
    assert "Model Runner V1 does not support: DFlash candidate-head drafts" in str(refused.value)
