"""The seed's MTP configuration on a GPTQ 4-bit target with a BF16 MTP head, on vLLM's CPU build
(issue 31; docs/gptq-cpu.md says which source lines decide it).

``specbench tiny-model --quantization gptq-4bit`` writes ``mtp-gptq/``: the MTP chain target of
``mtp/`` with every linear layer of its decoder blocks GPTQ-packed (group 32, symmetric), its
routed experts and its ``mtp.*`` head BF16 (negative ``dynamic`` rules). The answers are the
chain's (bench/tinymodel/_chain.py), exactly: greedy output ``sigma`` applied token by token,
MTP acceptance 1.0 at both positions. The load lines say the target's layers ran on vLLM's CPU
4-bit kernel and the draft loaded unquantized.

The same checkpoint with GPTQ routed experts (``--gptq-experts``) is refused by the CPU build on
a CPU without AMX (no WNA16 MoE backend): shown by an opt-in test
(``SPECBENCH_ENGINE_GPTQ_MOE=1``, one more server start, ~1 min).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import engine_server as es
import pytest
from engine_server import GREEDY_PROMPTS, GREEDY_TOKENS, SEED_K
from test_seed_methods_vllm_cpu import chain_text

from bench.engines import get_engine
from bench.measure import scan_log
from bench.tinymodel import GptqOptions, TinyModels, make_tiny_models

CONFIG = "mtp_gptq"
TARGET = "/models/mtp-gptq"
COUNTERS = (
    "vllm:spec_decode_num_drafts_total",
    "vllm:spec_decode_num_draft_tokens_total",
    "vllm:spec_decode_num_accepted_tokens_total",
)
#: the kernel build without vLLM's CPU 4-bit GEMM (``cpu_gemm_wna16``: docs/gptq-cpu.md)
NO_WNA16_LIBRARY = "_C_AVX2"


def gptq_models(folder: Path, options: GptqOptions) -> TinyModels:
    made = make_tiny_models(folder, seed=0, gptq=options)
    assert made.mtp_gptq is not None
    for path in (folder, *folder.iterdir()):  # the server runs as uid 10001
        path.chmod(0o755)
    return made


def kernel_library(client: Any, image: str) -> str:
    """Which of vLLM's kernel builds this CPU gets (the image's ``vllm kernels``)."""
    out: bytes = client.containers.run(image, entrypoint=["vllm"], command=["kernels"], remove=True)
    library: str = json.loads(out.decode().strip().splitlines()[-1])["library"]
    return library


def start(client: Any, folder: Path) -> es.Server:
    """The seed's MTP flags (engine_server.CONFIGS["mtp"]) on ``mtp-gptq/``."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(es.CONFIGS, CONFIG, es.CONFIGS["mtp"])
        patch.setitem(es.TARGETS, CONFIG, TARGET)
        return es.start_server(client, CONFIG, folder)


@dataclass
class GptqRun:
    models: TinyModels
    log: str
    greedy: list[es.Completion]
    counters: dict[str, float]  # deltas over the greedy requests
    per_position: list[float]  # the engine's own, since start


@pytest.fixture(scope="module")
def gptq_run(
    docker_client: Any, vllm_cpu_image: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GptqRun]:
    folder = tmp_path_factory.mktemp("gptq-models")
    made = gptq_models(folder, GptqOptions())
    try:
        server = start(docker_client, folder)
    except RuntimeError:
        if kernel_library(docker_client, vllm_cpu_image) == NO_WNA16_LIBRARY:
            pytest.skip(f"this CPU gets vLLM's {NO_WNA16_LIBRARY} build: no cpu_gemm_wna16")
        raise
    try:
        _, before = es.metrics(server.base_url)
        greedy = [es.chat_stream(server.base_url, p, GREEDY_TOKENS) for p in GREEDY_PROMPTS]
        _, after = es.metrics(server.base_url)
        yield GptqRun(
            models=made,
            log=server.logs(),
            greedy=greedy,
            counters={n: es.counter(after, n) - es.counter(before, n) for n in COUNTERS},
            per_position=es.per_position(after),
        )
    finally:
        server.stop()


def test_greedy_output_is_the_chain(gptq_run: GptqRun) -> None:
    for prompt, done in zip(GREEDY_PROMPTS, gptq_run.greedy, strict=True):
        assert done.usage["completion_tokens"] == GREEDY_TOKENS
        assert done.text == chain_text(gptq_run.models, prompt, GREEDY_TOKENS)


def test_mtp_acceptance_is_exactly_one(gptq_run: GptqRun) -> None:
    k = SEED_K["mtp"]
    drafts, draft_tokens, accepted = (gptq_run.counters[n] for n in COUNTERS)
    assert drafts > 0
    assert draft_tokens == k * drafts
    assert accepted == draft_tokens  # acceptance 1.0, mean acceptance length k + 1
    assert len(gptq_run.per_position) == k
    assert gptq_run.per_position == [gptq_run.per_position[0]] * k


def test_load_lines_show_the_cpu_4bit_kernel_and_a_bf16_draft(gptq_run: GptqRun) -> None:
    log = gptq_run.log
    assert "quantization=auto_gptq" in log  # quant_method gptq -> AutoGPTQConfig
    assert "Using CPUWNA16LinearKernel for AutoGPTQLinearMethod" in log
    assert "Using CPU Unquantized MoE backend" in log  # routed experts (target and MTP) BF16
    assert "Resolved architecture: Qwen3NextMTP" in log
    assert "Loading drafter model..." in log
    assert "method `qwen3_next_mtp` is deprecated and replaced with mtp." in log
    findings = {f.code for f in scan_log(log, get_engine("vllm").load_patterns, True)}
    assert "missing_tensors" not in findings
    print("\n" + "\n".join(line for line in log.splitlines() if "kernel build" in line))


@pytest.mark.skipif(
    os.environ.get("SPECBENCH_ENGINE_GPTQ_MOE") != "1",
    reason="opt-in (one more server start): SPECBENCH_ENGINE_GPTQ_MOE=1",
)
def test_gptq_routed_experts_are_refused_without_amx(
    docker_client: Any, vllm_cpu_image: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """CPUExpertsInt4 needs AMX (fused_moe/experts/cpu_moe.py:839-845 in 0.32.0), the Zen
    backend zentorch: without them no WNA16 MoE backend (oracle/int_wna16.py:361-363)."""
    if "amx_tile" in Path("/proc/cpuinfo").read_text():
        pytest.skip("this CPU has AMX: the CPU MoE kernel may serve it")
    folder = tmp_path_factory.mktemp("gptq-experts")
    gptq_models(folder, GptqOptions(quantize_experts=True))
    container = docker_client.containers.run(
        vllm_cpu_image,
        entrypoint=["vllm"],
        command=["serve", TARGET, *es.CONFIGS["mtp"], "--served-model-name", es.SERVED],
        detach=True,
        volumes={str(folder): {"bind": "/models", "mode": "ro"}},
        shm_size="1g",
        environment={"VLLM_CPU_KVCACHE_SPACE": "1"},
        labels={"specbench.managed": "true", "specbench.config": "mtp_gptq_experts"},
    )
    try:
        exit_code = container.wait(timeout=es.START_TIMEOUT_S)["StatusCode"]
        log = container.logs().decode(errors="replace")
    finally:
        container.remove(force=True)
    assert exit_code != 0
    assert "Using CPUWNA16LinearKernel for AutoGPTQLinearMethod" in log  # dense layers fine
    assert "No WNA16 MoE backend supports the deployment configuration." in log
