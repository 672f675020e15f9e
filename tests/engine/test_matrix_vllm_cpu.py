"""The whole pipeline on a real engine: bench/experiments/tiny-vllm-cpu.yaml through
``specbench matrix --launcher docker`` and ``specbench report``, with answers known in advance.

- target as its own draft: acceptance exactly 1.0 and mean acceptance length exactly k+1 in
  every measured window, at every k of the sweep; every position accepted as often as drafted
  (exact on the CPU only, and above concurrency 1 only without AMX: tests/oracles.py says why a
  GPU, or a batch on an AMX CPU, gives >= 0.98);
- partial draft: 0 < acceptance < 1, accepted counts non-increasing with the position, and the
  normalised figures equal the counter deltas recomputed here from the raw snapshots;
- n-gram: the figures equal the counter deltas, whatever the rate;
- every request's server-counted prompt_tokens equals P (the real chat template);
- greedy outputs identical to the baseline's at concurrency 1 (the report's lossless check);
- no logprob probes: the CPU build's engine core dies on logprobs (no C++ compiler for its
  compiled sampler op), so the tiny experiment turns them off;
- the engine version and backend come from the server and the hardware;
- the client's TTFT against the engine's own TTFT histogram over the same windows (never
  below it; how far above is a figure: tests/bench_engine_ttft.py);
- killing the engine container in the middle of a measured iteration (a measured iteration
  of the baseline at c=2, or c=4 when c=2 went by unseen, its streams under way as the
  engine's own counter shows): the configuration fails naming the cut streams and the
  server's exit, no traceback; every earlier payload stays byte for byte, and
  --resume measures that level again, exactly (the cut streams' text is the start of the
  same prompts' greedy answers);
- the kernel build each server ran (vLLM's own run-time dispatch, logged by the image) is the
  one the image's ``vllm kernels`` reports on this machine, and the report shows it.

One server start per configuration, plus the killed baseline's restart: the resumed baseline
also serves the seed's ``specbench run`` command line and the greedy streams that
test_vllm_cpu.py checks, before it is stopped (no server of its own).
"""

from __future__ import annotations

import itertools
import json
import math
from typing import Any

import pytest
from merged_streams import resent, timed, unpaired, views_for_outputs
from oracles import ONE_READ, SELF_DRAFT_MIN_ACCEPTANCE, cpu_batch_exact
from tiny_run import TinyRun

from bench.core import sha256_file
from bench.engines import load_experiment
from bench.report import lossless
from bench.schema import EXPERIMENTS_DIR, Payload, read_payload

P = 128
# vLLM's own counter names (vllm/v1/metrics/loggers.py, the spec_decode counters), typed here
# so the recomputation below shares nothing with bench.measure
DRAFTS = "vllm:spec_decode_num_drafts_total"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"


def payloads(run: TinyRun, config: str) -> list[Payload]:
    return [read_payload(p) for p in sorted((run.out / "payloads").glob(f"{config}-c*.json"))]


def windows(p: Payload) -> list[Any]:
    return [it for it in p.evidence.iterations if not it.warmup]


def test_every_payload_is_a_real_engine_toy_run(tiny_run: TinyRun) -> None:
    """Valid, or invalid for no other reason than streams a loaded machine delivered whole
    (tests/engine/merged_streams.py: what load can take away is the timing, nothing else)."""
    files = sorted((tiny_run.out / "payloads").glob("*.json"))
    assert len(files) == 5 * 3  # baseline, self-draft k1 and k3, partial draft, ngram; c 1 2 4
    untimed = []
    for f in files:
        p = read_payload(f)
        if not timed(p, f.name):
            untimed.append(f.name)
        assert (p.simulated, p.evidence.run.toy_model) == (False, True)
        assert (p.engineVersion, p.backend) == ("0.32.0", "cpu")  # from /version, no GPU
        counts = {r.prompt_tokens for it in p.evidence.iterations for r in it.requests}
        assert counts == {P}, f.name
        launch = p.evidence.launch  # what ran, recorded when it ran (the report shows it)
        assert launch is not None and launch.launcher == "docker", f.name
        assert launch.argv == launch.server_argv and launch.argv[:2] == ["vllm", "serve"]
        assert launch.docker_run is not None and f" {launch.image} " in launch.docker_run
    print(f"\nuntimed by load: {untimed or 'none'}")
    text = (tiny_run.out / "report" / "REPORT.md").read_text()
    assert text.startswith("> **REAL ENGINE, TOY MODEL:")
    assert "baseline: docker run" in text and "specbench-" in text.split("## Reproduction")[1]


def cpu_flags(p: Payload) -> list[str]:
    k = p.evidence.server_log.cpu_kernel if p.evidence.server_log else None
    assert k is not None  # every payload of the tier records the kernel build and the flags
    return k.cpu_flags


@pytest.mark.parametrize("k", [1, 3])
def test_target_as_its_own_draft_accepts_everything(tiny_run: TinyRun, k: int) -> None:
    exact_levels = 0
    for p in payloads(tiny_run, f"self-draft-k{k}"):
        pooled = [0, 0]
        for it in windows(p):
            acc = it.acceptance
            assert acc is not None and acc.drafts > 0
            assert acc.draft_tokens == k * acc.drafts
            pooled = [pooled[0] + acc.accepted_tokens, pooled[1] + acc.draft_tokens]
            if cpu_batch_exact(p.evidence.workload.concurrency, cpu_flags(p)):
                assert acc.acceptance_rate == SELF_DRAFT_MIN_ACCEPTANCE["cpu"] == 1.0
                assert acc.mean_acceptance_length == k + 1
                assert acc.accepted_per_position == [acc.drafts] * k
        if cpu_batch_exact(p.evidence.workload.concurrency, cpu_flags(p)):
            exact_levels += 1
        else:  # AMX and a batch: the GPU's floor, pooled (tests/oracles.py)
            assert pooled[0] / pooled[1] >= SELF_DRAFT_MIN_ACCEPTANCE["cuda"]
    assert exact_levels >= 1  # c=1 is exact on every CPU


def _recomputed(it: Any) -> tuple[float, float, float]:
    """(drafts, draft tokens, accepted) from the raw before/after snapshots of one window."""
    b, a = it.acceptance.before.values, it.acceptance.after.values
    return tuple(a[n] - b.get(n, 0.0) for n in (DRAFTS, DRAFT_TOKENS, ACCEPTED))  # type: ignore[return-value]


def _per_position_sum(it: Any) -> float:
    b, a = it.acceptance.before.values, it.acceptance.after.values
    return sum(v - b.get(k, 0.0) for k, v in a.items() if k.startswith(PER_POS))


SPECULATIVE = {"self-draft-k1": 1, "self-draft-k3": 3, "partial-draft": 3, "ngram": 3}
DRAFTS_EVERY_STEP = ("self-draft-k1", "self-draft-k3", "partial-draft")


@pytest.mark.parametrize("config", sorted(SPECULATIVE))
def test_counters_account_for_the_generated_tokens(tiny_run: TinyRun, config: str) -> None:
    """vLLM's accounting (vllm/v1/core/sched/scheduler.py:2346-2370 and
    v1/spec_decode/metrics.py:41-47, 0.33.0; the same in the 0.32.0 CPU build): each step that
    verifies a request's drafts counts one draft, its draft tokens and its accepted tokens
    a = (tokens the step generated) - 1, and adds 1 to position i's count for each i < a. So
    in a window of c requests that each generate n tokens, whose first token comes from
    prefill (no drafts), and whose last verifying step may overshoot the end by at most k:

        sum(per position) == accepted
        drafts + accepted <= c * (n - 1) + c * k       (every drafted step yields a + 1)
        drafts + accepted >= c * (n - 1)               (a draft model drafts at every step)

    n-gram lookup drafts only where the prompt matches, so only the first two hold for it."""
    k = SPECULATIVE[config]
    for p in payloads(tiny_run, config):
        for it in windows(p):
            drafts, _, accepted = _recomputed(it)
            assert _per_position_sum(it) == accepted, (p.engineFlags.concurrency, it.index)
            generated = sum((r.completion_tokens or 0) - 1 for r in it.requests)
            c = len(it.requests)
            assert drafts + accepted <= generated + c * k, (drafts, accepted, generated)
            if config in DRAFTS_EVERY_STEP:
                assert drafts + accepted >= generated, (drafts, accepted, generated)


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
    """The outputs are the engine's whatever the client's clock saw: a payload a loaded machine
    left untimed is compared too (merged_streams.py); the report's own table, which leaves an
    invalid run out, is read where both sides were timed."""
    rows = [r for r in lossless(views_for_outputs(tiny_run.out)) if r.concurrency == 1]
    assert {r.config for r in rows} == {"self-draft-k1", "self-draft-k3", "partial-draft", "ngram"}
    base = read_payload(tiny_run.out / "payloads" / "baseline-c1.json")
    for row in rows:
        # an iteration a busy machine made the client re-measure pairs with nothing
        run = read_payload(tiny_run.out / "payloads" / f"{row.config}-c1.json")
        assert row.matched == row.requests - unpaired(base, run), row
        assert row.identical == row.matched, row.first
        assert row.verdict == ("identical" if row.matched else "not compared"), row
    text = (tiny_run.out / "report" / "REPORT.md").read_text()
    # matched, identical, probed (none: the CPU build has no logprobs, the test below),
    # near-ties, real, unclassified
    pd = read_payload(tiny_run.out / "payloads" / "partial-draft-c1.json")
    n = 3 - unpaired(base, pd)
    row = f"| partial-draft | 1 | baseline | {n} of 3 | {n} | 0 | 0 | 0 | 0 | identical |"
    shown = timed(base, "baseline-c1") and timed(pd, "partial-draft-c1")
    assert (row in text) == (shown and n > 0), (shown, n)


def test_no_logprob_probes_on_the_cpu_build(tiny_run: TinyRun) -> None:
    """vLLM 0.32.0's CPU build cannot serve logprobs: its sampler's torch.compile'd
    batched_count_greater_than (vllm/v1/sample/ops/logprobs.py) needs a C++ compiler the image
    lacks (InvalidCxxCompiler), and the engine core dies (seen here with the runner's default
    probes: the baseline then died before its own checks). The tiny experiment turns probes off
    (workload.logprob_probes: 0), so no payload carries any, and the lossless rows, all identical
    on the CPU, need none. The probes' place after the last level, where a server they upset
    costs no measurement, is tested on the emulator (tests/integration/test_lossless_probes.py)."""
    tiny = load_experiment(EXPERIMENTS_DIR / "tiny-vllm-cpu.yaml")
    assert tiny.workload.logprob_probes == 0
    for f in sorted((tiny_run.out / "payloads").glob("*.json")):
        assert read_payload(f).evidence.logprob_probes is None, f.name
    rows = lossless(views_for_outputs(tiny_run.out))
    flags = cpu_flags(read_payload(next((tiny_run.out / "payloads").glob("baseline-c1.json"))))
    assert rows
    for r in rows:  # identical; at c>1 on an AMX CPU a divergence is possible (tests/oracles.py)
        base = read_payload(tiny_run.out / "payloads" / f"baseline-c{r.concurrency}.json")
        run = read_payload(tiny_run.out / "payloads" / f"{r.config}-c{r.concurrency}.json")
        # iterations a busy machine made the client re-measure pair with nothing: under two
        # burners every iteration of the baseline at c=4 was (2026-12-07), so nothing compared
        assert r.matched == r.requests - unpaired(base, run), r
        if r.matched == 0:
            assert r.verdict == "not compared", r
            continue
        allowed = {"identical"} if cpu_batch_exact(r.concurrency, flags) else {
            "identical", "unclassified",
        }  # fmt: skip
        assert r.verdict in allowed, r


def test_client_ttft_against_the_engines_own_clock(tiny_run: TinyRun) -> None:
    """Per window, the client's mean TTFT minus the server's (its histogram's deltas over the
    same window): what no load can change. The engine starts its clock when the request reaches
    its core, after the client sent it, and makes the first token before the client can read
    it, so the client is never below the engine: never more than 1 ms below, in every window.
    Every measured window carries both clocks. How far above (the HTTP front end: parsing,
    chat template, tokenizing, the first chunk's way back; on 2 cores that the engine keeps
    busy, and more on a loaded machine, far longer) is a figure, not a pass/fail: printed here
    per level, and measured with the machine's load by tests/bench_engine_ttft.py
    (docs/benchmarks.md)."""
    by_level: dict[int, list[float]] = {}
    expected = 0
    for f in sorted((tiny_run.out / "payloads").glob("*.json")):
        p = read_payload(f)
        expected += p.evidence.workload.iterations
        for it in windows(p):
            client = [r.ttft_ms for r in it.requests if r.ttft_ms is not None]
            assert it.server_ttft_ms is not None and client, (f.name, it.index)
            assert len(client) == len(it.requests), (f.name, it.index)
            gap = sum(client) / len(client) - it.server_ttft_ms
            by_level.setdefault(p.engineFlags.concurrency, []).append(gap)
    gaps = sorted(g for level in by_level.values() for g in level)
    assert len(gaps) == expected == 15 * 3  # 15 payloads, 3 measured windows each
    assert gaps[0] >= -1.0, gaps
    for c, level in sorted(by_level.items()):
        level.sort()
        median, p90 = level[len(level) // 2], level[math.ceil(0.9 * len(level)) - 1]
        print(f"\nc={c}: client - server TTFT per window (ms): min {level[0]:.2f}, "
              f"median {median:.2f}, p90 {p90:.2f}, max {level[-1]:.2f} "
              f"over {len(level)} windows (a figure: tests/bench_engine_ttft.py)")  # fmt: skip


def test_engine_killed_mid_iteration_is_recorded_and_resume_redoes_it(tiny_run: TinyRun) -> None:
    """Issue 38 fault 6: the baseline's container killed while the streams of a measured
    iteration at c=2 (c=4 when every iteration of c=2 went by too fast) were under way
    (tiny_run.py: the engine's own generated-token counter showed every stream started and at
    least half the iteration's tokens to come; an iteration the killer saw too late was let go
    whole). The kill names the level and iteration it cut; the record must show that very one
    cut."""
    kill, killed = tiny_run.kill, tiny_run.killed
    assert kill.error is None and kill.iteration is not None and kill.level is not None, kill
    c = kill.level
    assert kill.generated_before is not None and kill.generated_at_kill is not None, kill
    failed = {o.name: o for o in tiny_run.first.failed}
    assert set(failed) == {"baseline"}, failed  # the other configurations ran on
    reasons = failed["baseline"].reasons
    # the cause named: the cut streams of that iteration, then the server's exit; no traceback
    assert any(
        r.startswith(f"c={c} invalid_iteration: iteration {kill.iteration}: ") for r in reasons
    ), reasons
    # Docker reports the exit a moment after the streams broke: the matrix waits for it
    assert f"baseline: server exited (code 137) during the sweep (c={c})" in reasons, reasons
    assert reasons[-1].startswith("exit code 137: the server was killed with SIGKILL")
    assert not any("Traceback" in r for r in reasons)
    # the killed level: its warmup whole, and every measured iteration before the kill (those
    # the killer let go among them), the iteration the kill landed in cut mid-stream
    assert killed is not None and not killed.evidence.validity.valid
    its = {it.index: it for it in killed.evidence.iterations}
    assert all(it.valid for it in killed.evidence.iterations if it.index < kill.iteration)
    passed = {i for level, i in kill.passed if level == c}  # those of another level: c=2's
    assert passed < set(its) and all(i < kill.iteration for i in passed), kill
    assert c == 2 or 2 in {level for level, _ in kill.passed}, kill
    cut = its[kill.iteration].requests
    assert all(r.error is not None for r in cut), [r.error for r in cut]
    got = [sum(1 for c in r.chunk_chars if c) for r in cut]  # token chunks each stream got
    max_tokens = killed.evidence.workload.max_tokens
    assert any(n > 0 for n in got) and all(n < max_tokens for n in got), got
    log = (tiny_run.out / "logs" / "baseline.log").read_text()
    before, _, resumed = log.partition("(--resume) ---")
    # both attempts' logs are kept: the killed server's, then the resumed one's
    assert "vLLM server version 0.32.0" in before and "vLLM server version 0.32.0" in resumed
    assert not tiny_run.resumed.failed
    # every configuration that finished in the first run is skipped, not measured again, and
    # every valid payload the first run wrote is byte for byte as it was (an invalid one, the
    # killed level's or one a loaded machine spoiled, is measured again)
    finished_first = {o.name for o in tiny_run.first.outcomes if o.status == "done" and o.valid}
    skipped = {o.name for o in tiny_run.resumed.outcomes if o.status == "skipped"}
    assert finished_first <= skipped and "baseline" not in skipped
    kept = tiny_run.first_valid_sha256
    # baseline c=1 ran before the kill and stays, unless its streams came merged (a busy
    # machine: tests/engine/merged_streams.py) and the resume rightly measured it again
    spoiled = next(r for r in tiny_run.first.outcomes if r.name == "baseline").reasons
    c1_merged = any(r.startswith("c=1 invalid_iteration") and ONE_READ in r for r in spoiled)
    assert ("baseline-c1.json" in kept) != c1_merged, (sorted(kept), spoiled)
    assert f"baseline-c{c}.json" not in kept, sorted(kept)
    for name, sha in kept.items():
        assert sha256_file(tiny_run.out / "payloads" / name) == sha, name
    status = json.loads((tiny_run.out / "status.json").read_text())["configurations"]
    assert all(s["status"] in ("done", "skipped") for s in status.values()), status
    # resume measured the level again, valid, on the same prompts; the text each cut stream
    # had received is the start of its prompt's whole greedy answer (the same batch of two:
    # exact on every CPU but AMX, tests/oracles.py)
    redone = read_payload(tiny_run.out / "payloads" / f"baseline-c{c}.json")
    timed(redone, f"baseline-c{c}")  # its streams whole, at worst untimed by load
    again = {r.prompt_sha256: r for it in windows(redone) for r in it.requests}
    if kill.iteration in resent(redone):  # re-measured with other prompts: nothing to pair
        return
    assert {r.prompt_sha256 for r in cut} <= set(again)
    for r in cut:
        whole = again[r.prompt_sha256]
        assert whole.completion_tokens == max_tokens and whole.output_text
        if cpu_batch_exact(c, cpu_flags(redone)):
            assert r.output_text and whole.output_text.startswith(r.output_text), (
                r.output_text, whole.output_text,
            )  # fmt: skip


def test_each_server_ran_the_kernel_build_this_machine_dispatches_to(tiny_run: TinyRun) -> None:
    """The kernel build is read on the machine, never assumed: every payload's server logged
    the build that vLLM's own dispatch loaded, and it is the one `vllm kernels` reports in a
    fresh container here (AVX2-only CPUs get _C_AVX2: never the AVX-512 build)."""
    want = tiny_run.image_kernels
    assert want["library"] in ("_C", "_C_AVX512", "_C_AVX2"), want
    if "avx512f" not in want["cpuFlags"]:
        assert want["library"] == "_C_AVX2", want
    for f in sorted((tiny_run.out / "payloads").glob("*.json")):
        log = read_payload(f).evidence.server_log
        assert log is not None and log.cpu_kernel is not None, f.name
        assert (log.cpu_kernel.library, log.cpu_kernel.cpu_flags) == (
            want["library"],
            want["cpuFlags"],
        ), f.name
    hw = json.loads((tiny_run.out / "hardware.json").read_text())
    assert hw["extended"]["cpuFlags"] == want["cpuFlags"]  # the host's /proc/cpuinfo, same CPU
    text = (tiny_run.out / "report" / "REPORT.md").read_text()
    assert "CPU kernel build (as each server logged it)" in text
    library = want["library"].replace("_", "\\_")  # Markdown-escaped in the table
    assert f"| {library} | {want['isa']} |" in text
