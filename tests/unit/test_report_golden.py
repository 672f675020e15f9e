"""Golden test: the seed's published figures render into the seed's statements, computed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from bench.report import linked_files, render_report

REF = Path(__file__).resolve().parents[2] / "reports" / "reference"


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("ref")
    path = render_report(REF, out)
    return path, path.read_text(encoding="utf-8")


SEED_STATEMENTS = [
    "On vLLM, DFlash was 17.87% faster than MTP.",
    "On SGLang, DFlash was 12.14% faster than MTP.",
    "Within DFlash, vLLM was 12.12% faster than SGLang.",
    "Within MTP, vLLM was 6.67% faster than SGLang.",
    "SGLang delivered the lowest TTFT: 67.40 ms with DFlash and 69.30 ms with MTP.",
]


@pytest.mark.parametrize("statement", SEED_STATEMENTS)
def test_seed_statement_is_rendered(report: tuple[Path, str], statement: str) -> None:
    assert statement in report[1]


def test_statements_are_computed_not_copied() -> None:
    """The percentages appear nowhere in the reference data: the renderer computes them."""
    raw = (REF / "seed-published.json").read_text(encoding="utf-8")
    for figure in ("17.87", "12.14", "12.12", "6.67", "16.58", "73.54"):
        assert figure not in raw


def test_reference_is_labelled_and_assumption_stated(report: tuple[Path, str]) -> None:
    text = report[1]
    assert "published figures, no raw samples" in text
    assert "assumes stddev = 0.15 tok/s with n = 5" in text
    data = json.loads((REF / "seed-published.json").read_text(encoding="utf-8"))
    assert data["label"] == "published figures, no raw samples"


def test_derived_and_unknown_values(report: tuple[Path, str]) -> None:
    text = report[1]
    # vLLM's TTFTs were never published: unknown, bounded by the stated relations.
    assert "unknown (above 73.54 ms)" in text
    assert "MTP improved vLLM TTFT by 4.24 ms" in text
    assert "16.58 tok/s decode loss" in text
    assert "430.67 tok/s at concurrency 16" in text
    assert "SGLang + DFlash peaked at concurrency 4." in text
    assert "offered concurrency 8 and 16 queued in waves" in text


def test_invalid_first_attempt_is_reported_and_excluded(report: tuple[Path, str]) -> None:
    text = report[1]
    issues = text.split("## Correctness issues")[1].split("## Concurrency")[0]
    assert "42.30 tok/s" in issues
    assert "Seven MTP projection tensors were skipped" in issues
    ranking = text.split("## Decode ranking")[1].split("## Method comparison")[0]
    assert "42.30" not in ranking
    assert re.findall(r"^\d\. ", ranking, flags=re.M) == ["1. ", "2. ", "3. ", "4. "]


def test_markdown_parses_and_every_linked_chart_exists(report: tuple[Path, str]) -> None:
    path, text = report
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    assert any(t.type == "table_open" for t in tokens)
    links = linked_files(text)
    assert {"decode.svg", "ttft.svg", "concurrency.svg"} <= set(links)
    for target in links:
        assert (path.parent / target).is_file(), target
    assert "SIMULATED" not in text
