"""The lossless check's near-tie rule held against recordings of a real GPU server.

tests/fixtures/vllm-gpu (one H200 run of vLLM 0.26.0, bf16 tiny models; see
test_vllm_gpu_recordings.py) holds a streamed greedy completion with ``top_logprobs=2`` under
speculation, and payloads whose greedy outputs part from the baseline's. Checked here:
- specbench's probe parser reads the real stream: one entry per token, several per event;
- the real top-2 gaps are bf16 steps (multiples of 2^-5 nats), the fact NEAR_TIE_NATS rests on;
- at a recorded position whose top-2 are a near-tie, a run that took the runner-up (the pair
  swapped, the recorded gap) is a near-tie; at the recorded widest gap the same swap is real;
  a run whose token is not its own top-1 is real whatever the gap;
- the recorded diverging payloads (no probes then) are unclassified, never lossy nor passed;
- the emulator's logprobs have the recorded shape (keys and their order).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from bench.emulator import formats
from bench.emulator.logprobs import emission
from bench.measure._client import RawResponse, interpret_chat_stream
from bench.measure._probes import TOP_LOGPROBS, parse_logprobs
from bench.report import load_artifacts, lossless
from bench.report._lossless import NEAR_TIE_NATS, classify, top2
from bench.schema import LogprobProbe, TokenLogprobs, TopLogprob

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-gpu"
BF16_STEP = 2.0**-5  # the spacing of bf16 numbers in [4, 8)


def recorded() -> tuple[RawResponse, list[TokenLogprobs]]:
    lines = (FIXTURES / "stream-logprobs.sse").read_text().splitlines()
    events = [(0.001 * i, ln[6:].encode()) for i, ln in enumerate(lines) if ln.startswith("data: ")]
    raw = RawResponse(sent_at=0.0, status=200, events=events, complete=True, ended_at=1.0)
    return raw, parse_logprobs(raw)


def gap(t: TokenLogprobs) -> float:
    a, b = top2(t)
    return a.logprob - b.logprob


def as_probe(tokens: list[TokenLogprobs], text: str) -> LogprobProbe:
    return LogprobProbe(prompt_sha256="p", output_sha256=f"h({text})", tokens=tokens)


def took_runner_up(tokens: list[TokenLogprobs], at: int) -> list[TokenLogprobs]:
    """The recording with the runner-up taken at ``at``, the pair swapped at the same gap: what
    a configuration whose logits round the other way there streams (later tokens dropped)."""
    a, b = top2(tokens[at])
    flipped = [
        TopLogprob(token=b.token, logprob=a.logprob),
        TopLogprob(token=a.token, logprob=b.logprob),
    ]
    return [*tokens[:at], TokenLogprobs(token=b.token, logprob=a.logprob, top=flipped)]


def test_the_probe_parser_reads_the_real_stream_with_speculation() -> None:
    raw, tokens = recorded()
    rec = interpret_chat_stream(raw, "r", 0, 64)
    assert rec.error is None and not rec.reasons and rec.completion_tokens == len(tokens)
    assert sum(1 for n in rec.chunk_chars if n) < len(tokens)  # several tokens per event
    assert "".join(t.token for t in tokens) == rec.output_text
    assert all(len(t.top) == TOP_LOGPROBS and top2(t)[0].token == t.token for t in tokens)


def test_recorded_top2_gaps_are_bf16_steps() -> None:
    gaps = [gap(t) for t in recorded()[1]]
    assert all(abs(g / BF16_STEP - round(g / BF16_STEP)) < 1e-3 for g in gaps)
    # the threshold sits a few steps up: near-ties exist in a real stream, and most gaps are wider
    near = [g for g in gaps if g <= NEAR_TIE_NATS]
    assert 0 < len(near) < len(gaps) / 2


def test_a_recorded_near_tie_swapped_is_a_near_tie_and_the_widest_gap_is_not() -> None:
    _, tokens = recorded()
    text = "".join(t.token for t in tokens)
    tightest = min(range(len(tokens)), key=lambda i: (gap(tokens[i]) == 0, gap(tokens[i])))
    widest = max(range(len(tokens)), key=lambda i: gap(tokens[i]))
    assert 0 < gap(tokens[tightest]) <= NEAR_TIE_NATS < gap(tokens[widest])
    base = as_probe(tokens, text)
    tie = classify(base, as_probe(took_runner_up(tokens, tightest), "other"))
    assert tie is not None and (tie.verdict, tie.token) == ("near-tie", tightest)
    assert tie.baseline_gap == tie.speculative_gap == gap(tokens[tightest])
    real = classify(base, as_probe(took_runner_up(tokens, widest), "other"))
    assert real is not None and (real.verdict, real.token) == ("real", widest)


def test_a_token_the_run_itself_ranks_second_is_real_even_at_a_recorded_near_tie() -> None:
    _, tokens = recorded()
    at = min(range(len(tokens)), key=lambda i: (gap(tokens[i]) == 0, gap(tokens[i])))
    a, b = top2(tokens[at])
    # an unverified draft token: the run's own top-1 is still the baseline's token
    wrong = TokenLogprobs(token=b.token, logprob=b.logprob, top=[b, a])
    c = classify(as_probe(tokens, "x"), as_probe([*tokens[:at], wrong], "y"))
    assert c is not None and c.verdict == "real" and "not its own top-1" in c.why


def test_recorded_diverging_gpu_payloads_are_unclassified_not_lossy(tmp_path: Path) -> None:
    (tmp_path / "payloads").mkdir()
    for name in ("baseline-c1", "self-draft-c1"):
        shutil.copy(FIXTURES / "payloads" / f"{name}.json", tmp_path / "payloads")
    [row] = lossless(load_artifacts(tmp_path).runs)
    assert row.config == "self-draft" and row.identical < row.matched  # the recorded divergence
    assert row.probed == 0  # recorded before the probes existed
    assert {c.verdict for c in row.checks} == {"unclassified"}
    assert len(row.checks) == row.matched - row.identical
    assert (row.verdict, row.lossless) == ("unclassified", None)


def test_the_emulators_logprobs_have_the_recorded_shape() -> None:
    raw, _ = recorded()
    real = next(
        json.loads(d)["choices"][0]
        for _, d in raw.events
        if d != b"[DONE]" and json.loads(d)["choices"] and json.loads(d)["choices"][0]["logprobs"]
    )
    e = emission(0)
    emu = json.loads(
        formats.vllm_content_chunk(
            "r",
            0,
            "m",
            e.token,
            None,
            formats.chat_logprobs([(e.token, e.logprob, e.top)], TOP_LOGPROBS, "vllm"),
        )
    )["choices"][0]
    assert list(emu) == list(real)  # the choice's keys, in order
    emu_entry, real_entry = emu["logprobs"]["content"][0], real["logprobs"]["content"][0]
    assert list(emu_entry) == list(real_entry)
    assert list(emu_entry["top_logprobs"][0]) == list(real_entry["top_logprobs"][0])
    assert len(emu_entry["top_logprobs"]) == len(real_entry["top_logprobs"]) == TOP_LOGPROBS
