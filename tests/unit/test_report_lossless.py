"""The lossless check: speculative runs against their baseline, matched by prompt (hand-made
runs with known answers)."""

from __future__ import annotations

from bench.report import lossless
from bench.report._model import RequestOutput, RunView


def out(prompt: str, text: str, chunks: tuple[int, ...] = ()) -> RequestOutput:
    return RequestOutput(
        prompt_sha256=prompt, output_sha256=f"h({text})", text=text, token_chars=chunks
    )


def run(config: str, method: str, outputs: list[RequestOutput], c: int = 1) -> RunView:
    return RunView(
        key=f"{config}-c{c}",
        config=config,
        engine="vllm",
        method=method,
        concurrency=c,
        outputs=tuple(outputs),
    )


BASE = run(
    "vllm-baseline",
    "NONE",
    # one token per chunk: "the" " cat" " sat" / "a" " dog" " ran" " far"
    [out("p1", "the cat sat", (3, 4, 4)), out("p2", "a dog ran far", (1, 4, 4, 4))],
)


def test_identical_outputs_are_lossless() -> None:
    spec = run("vllm-mtp", "MTP", [out("p2", "a dog ran far"), out("p1", "the cat sat")])
    [row] = lossless([BASE, spec])
    assert (row.baseline, row.matched, row.identical, row.first) == ("vllm-baseline", 2, 2, None)
    assert row.lossless is True


def test_first_divergence_in_characters_and_baseline_tokens() -> None:
    spec = run("vllm-mtp", "MTP", [out("p1", "the cat sat"), out("p2", "a dog ran off")])
    [row] = lossless([BASE, spec])
    assert (row.matched, row.identical, row.lossless) == (2, 1, False)
    assert row.first is not None
    # "a dog ran f|ar" vs "a dog ran o|ff": character 10, inside the 4th token " far" (0-based 3)
    assert (row.first.char, row.first.token, row.first.prompt_sha256) == (10, 3, "p2")
    assert row.first.baseline.endswith("far") and row.first.speculative.endswith("off")


def test_unmatched_prompts_and_missing_baseline_are_said() -> None:
    other_prompts = run("vllm-mtp", "MTP", [out("q1", "the cat sat")])
    [row] = lossless([BASE, other_prompts])
    assert row.matched == 0 and row.lossless is None and row.note and "prompt seed" in row.note
    at_c4 = run("vllm-mtp", "MTP", [out("p1", "the cat sat")], c=4)
    [row] = lossless([BASE, at_c4])
    assert row.baseline is None and row.note == "no baseline run at this concurrency"
