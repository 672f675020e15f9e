"""The whole pipeline on a real engine: bench/experiments/tiny-vllm-cpu.yaml through
``specbench matrix --launcher docker`` and ``specbench report``, with answers known in advance.

- target as its own draft: acceptance exactly 1.0 and mean acceptance length exactly k+1 in
  every measured window, at every k of the sweep; every position accepted as often as drafted
  (exact on the CPU only: tests/oracles.py says why a GPU gives >= 0.98);
- partial draft: 0 < acceptance < 1, accepted counts non-increasing with the position, and the
  normalised figures equal the counter deltas recomputed here from the raw snapshots;
- n-gram: the figures equal the counter deltas, whatever the rate;
- every request's server-counted prompt_tokens equals P (the real chat template);
- greedy outputs identical to the baseline's at concurrency 1 (the report's lossless check);
- the engine version and backend come from the server and the hardware;
- the client's TTFT against the engine's own TTFT histogram over the same windows;
- killing the engine container mid-sweep (the baseline, after its first level): the failure is
  recorded with its log, earlier artifacts stay intact, and --resume finishes the rest.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from oracles import SELF_DRAFT_MIN_ACCEPTANCE

from bench.core import sha256_file
from bench.engines import ContainerSpec, load_experiment
from bench.matrix import DockerLauncher, MatrixOptions, MatrixResult, run_matrix
from bench.matrix._launch import DockerServer
from bench.measure._acceptance import VLLM_ACCEPTED, VLLM_DRAFT_TOKENS, VLLM_DRAFTS
from bench.report import load_artifacts, lossless, render_report
from bench.schema import Payload, read_payload
from bench.tinymodel import TinyModels

EXPERIMENT = "bench/experiments/tiny-vllm-cpu.yaml"
P = 128


def run_tiny(
    out: Path, models: Path, only: list[str], launcher: DockerLauncher | None = None, **kw: Any
) -> MatrixResult:
    opts = MatrixOptions(
        out=out, only=only, launcher="docker", model_cache=str(models), allow_unpinned=True,
        show_progress=False, **kw,
    )  # fmt: skip
    return run_matrix(load_experiment(EXPERIMENT), opts, launcher=launcher)


class KillAfterFirstLevel(DockerLauncher):
    """Kills the baseline's container once its first level's payload is on disk (the engine
    'crashes' mid-sweep); every other configuration runs untouched."""

    def __init__(self, payload: Path) -> None:
        super().__init__()
        self.payload = payload

    def start(self, spec: ContainerSpec, log_path: Path) -> DockerServer:
        server = super().start(spec, log_path)
        if spec.name is not None and spec.name.endswith("-baseline"):

            def kill() -> None:
                deadline = time.monotonic() + 900
                while not self.payload.exists() and time.monotonic() < deadline:
                    time.sleep(0.2)
                server.container.kill()

            threading.Thread(target=kill, daemon=True).start()
        return server


class TinyRun(NamedTuple):
    out: Path
    first: MatrixResult  # the run whose baseline container was killed after c1
    first_c1_sha256: str
    resumed: MatrixResult


@pytest.fixture(scope="session")
def tiny_run(
    vllm_cpu_image: str, tiny_models: TinyModels, tmp_path_factory: pytest.TempPathFactory
) -> TinyRun:
    """The whole experiment, its baseline killed after c1, then --resume: the oracles below read
    the resumed artifacts (baseline c1 from the first run, c2 and c4 from the second; the prompt
    seed makes them the same prompts either way)."""
    out = tmp_path_factory.mktemp("tiny-matrix") / "run"
    models = tiny_models.target.path.parent
    c1 = out / "payloads" / "baseline-c1.json"
    started = time.monotonic()
    first = run_tiny(out, models, [], launcher=KillAfterFirstLevel(c1))
    sha = sha256_file(c1) if c1.exists() else ""
    resumed = run_tiny(out, models, [], resume=True)
    took = time.monotonic() - started
    print(f"\ntiny matrix with a killed baseline and a resume: {took:.0f} s")
    render_report(out, out / "report")
    return TinyRun(out, first, sha, resumed)


def payloads(run: TinyRun, config: str) -> list[Payload]:
    return [read_payload(p) for p in sorted((run.out / "payloads").glob(f"{config}-c*.json"))]


def windows(p: Payload) -> list[Any]:
    return [it for it in p.evidence.iterations if not it.warmup]


def test_every_payload_is_a_valid_real_engine_toy_run(tiny_run: TinyRun) -> None:
    files = sorted((tiny_run.out / "payloads").glob("*.json"))
    assert len(files) == 5 * 3  # baseline, self-draft k1 and k3, partial draft, ngram; c 1 2 4
    for f in files:
        p = read_payload(f)
        assert p.evidence.validity.valid, (f.name, p.evidence.validity.reasons)
        assert (p.simulated, p.evidence.run.toy_model) == (False, True)
        assert (p.engineVersion, p.backend) == ("0.32.0", "cpu")  # from /version, no GPU
        counts = {r.prompt_tokens for it in p.evidence.iterations for r in it.requests}
        assert counts == {P}, f.name
    text = (tiny_run.out / "report" / "REPORT.md").read_text()
    assert text.startswith("> **REAL ENGINE, TOY MODEL:")


@pytest.mark.parametrize("k", [1, 3])
def test_target_as_its_own_draft_accepts_everything(tiny_run: TinyRun, k: int) -> None:
    for p in payloads(tiny_run, f"self-draft-k{k}"):
        for it in windows(p):
            acc = it.acceptance
            assert acc is not None and acc.drafts > 0
            assert acc.draft_tokens == k * acc.drafts
            assert acc.acceptance_rate == SELF_DRAFT_MIN_ACCEPTANCE["cpu"] == 1.0
            assert acc.mean_acceptance_length == k + 1
            assert acc.accepted_per_position == [acc.drafts] * k


def _recomputed(it: Any) -> tuple[float, float, float]:
    """(drafts, draft tokens, accepted) from the raw before/after snapshots of one window."""
    b, a = it.acceptance.before.values, it.acceptance.after.values
    return tuple(a[n] - b.get(n, 0.0) for n in (VLLM_DRAFTS, VLLM_DRAFT_TOKENS, VLLM_ACCEPTED))  # type: ignore[return-value]


@pytest.mark.parametrize("config", ["partial-draft", "ngram"])
def test_figures_equal_the_counter_deltas(tiny_run: TinyRun, config: str) -> None:
    for p in payloads(tiny_run, config):
        totals = [0.0, 0.0, 0.0]
        for it in windows(p):
            d, dt, acc = _recomputed(it)
            assert (it.acceptance.drafts, it.acceptance.draft_tokens) == (d, dt)
            assert it.acceptance.accepted_tokens == acc
            totals = [x + y for x, y in zip(totals, (d, dt, acc), strict=True)]
        overall = p.evidence.acceptance
        assert overall is not None
        assert overall.acceptance_rate == pytest.approx(totals[2] / totals[1])
        assert overall.mean_acceptance_length == pytest.approx(1 + totals[2] / totals[0])
        if config == "partial-draft":
            assert 0 < overall.acceptance_rate < 1
            per_pos = overall.accepted_per_position
            assert len(per_pos) == 3 and all(a >= b for a, b in itertools.pairwise(per_pos))


def test_greedy_outputs_identical_to_the_baseline_at_c1(tiny_run: TinyRun) -> None:
    rows = [r for r in lossless(load_artifacts(tiny_run.out).runs) if r.concurrency == 1]
    assert {r.config for r in rows} == {"self-draft-k1", "self-draft-k3", "partial-draft", "ngram"}
    for row in rows:
        assert row.matched == row.requests > 0, row
        assert row.identical == row.matched, row.first
    text = (tiny_run.out / "report" / "REPORT.md").read_text()
    assert "| partial-draft | 1 | baseline | 3 of 3 | 3 | identical |" in text


def test_client_ttft_against_the_engines_own_clock(tiny_run: TinyRun) -> None:
    """Per window, the client's mean TTFT minus the server's (its histogram's deltas over the
    same window). The client can never see a token before the engine made it: never more than
    1 ms below, in every window. Above: the engine starts its clock when the request reaches the
    engine core, the client when it sends, and the difference is the HTTP front end (parsing,
    chat template, tokenizing, the first chunk's way back); on 2 cores that the engine itself
    keeps busy a window can stall far longer, so the 10 ms bound holds for the median window,
    and the spread is printed."""
    gaps: list[float] = []
    for f in sorted((tiny_run.out / "payloads").glob("*.json")):
        for it in windows(read_payload(f)):
            client = [r.ttft_ms for r in it.requests if r.ttft_ms is not None]
            if it.server_ttft_ms is None or not client:
                continue
            gaps.append(sum(client) / len(client) - it.server_ttft_ms)
    assert len(gaps) >= 15
    print(f"\nclient - server TTFT per window (ms): min {min(gaps):.2f}, max {max(gaps):.2f}, "
          f"mean {sum(gaps) / len(gaps):.2f} over {len(gaps)} windows")  # fmt: skip
    gaps.sort()
    median = gaps[len(gaps) // 2]
    print(f"median {median:.2f} ms")
    assert gaps[0] >= -1.0, gaps
    assert median <= 10.0, gaps


def test_killed_engine_is_recorded_and_resume_finishes(tiny_run: TinyRun) -> None:
    failed = {o.name: o for o in tiny_run.first.failed}
    assert set(failed) == {"baseline"}, failed  # the other configurations ran on
    assert failed["baseline"].reasons
    log = (tiny_run.out / "logs" / "baseline.log").read_text()
    killed, _, resumed = log.partition("(--resume) ---")
    # both attempts' logs are kept: the killed server's, then the resumed one's
    assert "vLLM server version 0.32.0" in killed and "vLLM server version 0.32.0" in resumed
    assert tiny_run.first_c1_sha256, "the first level's payload was not written before the kill"
    assert not tiny_run.resumed.failed
    # every configuration that finished in the first run is skipped, not measured again
    finished_first = {o.name for o in tiny_run.first.outcomes if o.status == "done" and o.valid}
    skipped = {o.name for o in tiny_run.resumed.outcomes if o.status == "skipped"}
    assert finished_first <= skipped and "baseline" not in skipped
    c1 = tiny_run.out / "payloads" / "baseline-c1.json"
    assert sha256_file(c1) == tiny_run.first_c1_sha256  # finished payloads are never rewritten
    status = json.loads((tiny_run.out / "status.json").read_text())["configurations"]
    assert all(s["status"] in ("done", "skipped") for s in status.values()), status
