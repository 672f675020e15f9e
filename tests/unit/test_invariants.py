"""Invariants on the boundary models (issue 47, class 2), checked the same way by `validate`,
`report`, `compare` and `publish`: a payload whose figures its own evidence contradicts is
named (validate: exit 1 with the JSON path; report and compare: listed at the top, used for no
figure; publish: exit 2 naming the file), and no output states the contradicted figure.

Each case is one change to a payload the demo wrote (the emulator), made as a hostile file
would: SHA256SUMS is written again, so that only the evidence can give the change away. On main
101bc6e `validate` said "ok" to most of them and the report printed the changed figure."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from demo_seed import categories_run, copy_of, seed_run
from report_factory import seed_matrix, write_artifacts, write_sums

from bench.cli import main
from bench.report import compare_hosts
from bench.schema import check_payload, read_payload

pytestmark = pytest.mark.unit

Doc = dict[str, Any]
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"


def cli(*args: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    text = out.getvalue() + err.getvalue()
    assert "internal error" not in text and "Traceback" not in text, text
    return code, text


def _it(d: Doc, i: int = 1) -> Doc:
    its: list[Doc] = d["evidence"]["iterations"]
    return its[i]


def accept_400(d: Doc) -> str:
    # engineFlags.specAcceptanceRate is bounded by its schema; the evidence's rate was not
    d["evidence"]["acceptance"]["acceptance_rate"] = 4.0
    return "400.00%"


def accepted_over_drafted(d: Doc) -> str:
    acc = _it(d)["acceptance"]
    acc["accepted_tokens"] = acc["draft_tokens"] + 5
    return ""


def window_backwards(d: Doc) -> str:
    _it(d)["window_end"] = _it(d)["window_start"] - 1.0
    return ""


def empty_window(d: Doc) -> str:
    _it(d)["requests"] = []
    return ""


def tokens_over_max(d: Doc) -> str:
    _it(d)["requests"][0]["completion_tokens"] = 5000
    return ""


def decode_424242(d: Doc) -> str:
    d["evidence"]["figures"]["decode_tok_s"]["mean"] = 424242.0
    d["tokSOut"] = 424242.0
    return "424242"


def snapshot_changed(d: Doc) -> str:
    _it(d)["acceptance"]["after"]["values"][ACCEPTED] += 7
    return ""


def invalid_request_in_a_valid_run(d: Doc) -> str:
    _it(d)["requests"][0]["reasons"] = ["early stop: completion_tokens=3 != max_tokens=16"]
    return ""


SEED_CASES: dict[str, tuple[Callable[[Doc], str], str]] = {
    # name: (change, a part of the JSON path of the finding)
    "acceptance over 1": (accept_400, "acceptance.acceptance_rate"),
    "accepted over drafted": (accepted_over_drafted, "acceptance.accepted_tokens"),
    "a window ending before it starts": (window_backwards, "window_end"),
    "a measured window without requests": (empty_window, ".requests"),
    "5000 tokens at max_tokens 16": (tokens_over_max, "completion_tokens"),
    "a summary its samples do not give": (decode_424242, "figures.decode_tok_s.mean"),
    "a /metrics snapshot changed, its figures kept": (snapshot_changed, "iterations[1].acceptance"),
    "an invalid request in a valid run": (invalid_request_in_a_valid_run, "validity.valid"),
}


def category_424242(d: Doc) -> str:
    d["evidence"]["categories"][0]["decode_tok_s"]["mean"] = 424242.0
    return "424242"


def request_counts_changed(d: Doc) -> str:
    d["evidence"]["iterations"][0]["requests"][0]["spec_tokens"]["accepted_tokens"] -= 1
    return ""


def agrees_flipped(d: Doc) -> str:
    d["evidence"]["categories"][0]["request_acceptance"]["agrees_with_counters"] = False
    return ""


def category_not_in_the_set(d: Doc) -> str:
    it = d["evidence"]["iterations"][0]
    it["category"] = "poetry"
    for r in it["requests"]:
        r["category"] = "poetry"
    return ""


CATEGORY_CASES: dict[str, tuple[Callable[[Doc], str], str]] = {
    "a category summary its samples do not give": (category_424242, "categories[0].decode_tok_s"),
    "a request's own counts changed": (request_counts_changed, "request_acceptance"),
    "an 'agrees' flag flipped": (agrees_flipped, "categories[0].request_acceptance"),
    "a category the prompt set has not": (category_not_in_the_set, "iterations[0].category"),
}


def mutated(run: Path, dest: Path, name: str, change: Callable[[Doc], str]) -> tuple[Path, str]:
    """A copy of ``run`` with payload ``name`` changed and SHA256SUMS vouching for the change;
    and the changed figure as a report would print it ('': the change is not a figure)."""
    art = copy_of(run, dest)
    f = art / "payloads" / name
    doc = json.loads(f.read_text())
    word = change(doc)
    f.write_text(json.dumps(doc, indent=2))
    write_sums(art)
    return art, word


def check_everywhere(art: Path, name: str, where: str, word: str, tmp: Path) -> None:
    f = art / "payloads" / name
    found = [p.path for p in check_payload(read_payload(f)) if p.severity == "error"]
    assert any(where in p for p in found), found
    code, text = cli("validate", str(f))
    assert code == 1 and where in text and f"{f}: ok" not in text, text
    code, text = cli("report", str(art), "--out", str(tmp / "report"))
    assert code == 0, text
    report = (tmp / "report" / "REPORT.md").read_text()
    top = report.split("\n# ", 1)[0]
    assert "NOT USED FOR ANY FIGURE" in top and f"payloads/{name}" in top, top
    assert "its own evidence contradicts it" in top
    # the changed figure is stated nowhere but where the payload is named as contradicting it
    stated = [ln for ln in report.splitlines() if word in ln and f"payloads/{name}" not in ln]
    assert not word or not stated, stated


@pytest.mark.parametrize("case", sorted(SEED_CASES))
def test_a_payload_its_evidence_contradicts_is_named_and_not_used(
    tmp_path: Path, case: str
) -> None:
    change, where = SEED_CASES[case]
    art, word = mutated(seed_run(), tmp_path / "run", "vllm-mtp-c2.json", change)
    check_everywhere(art, "vllm-mtp-c2.json", where, word, tmp_path)


@pytest.mark.parametrize("case", sorted(CATEGORY_CASES))
def test_a_category_its_evidence_contradicts_is_named_and_not_used(
    tmp_path: Path, case: str
) -> None:
    change, where = CATEGORY_CASES[case]
    art, word = mutated(categories_run(), tmp_path / "run", "sglang-mtp-c1.json", change)
    check_everywhere(art, "sglang-mtp-c1.json", where, word, tmp_path)


def test_the_seed_runs_contradict_nothing() -> None:
    for run in (seed_run(), categories_run()):
        for f in sorted((run / "payloads").glob("*.json")):
            p = read_payload(f)
            assert [x for x in check_payload(p) if x.severity == "error"] == [], f


def _real_run(root: Path) -> Path:
    return write_artifacts(root, seed_matrix(simulated=False, sweep=False))


def test_publish_refuses_a_payload_its_evidence_contradicts(tmp_path: Path) -> None:
    art = _real_run(tmp_path / "run")
    f = art / "payloads" / "vllm-mtp-c1.json"
    doc = json.loads(f.read_text())
    decode_424242(doc)
    f.write_text(json.dumps(doc))
    write_sums(art)
    code, text = cli("publish", str(art), "--out", str(tmp_path / "bundle"))
    assert code == 2 and "vllm-mtp-c1.json" in text and "contradicts" in text, text
    assert not (tmp_path / "bundle").exists()


def test_compare_names_a_payload_its_evidence_contradicts(tmp_path: Path) -> None:
    a = _real_run(tmp_path / "gpu1")
    b = _real_run(tmp_path / "gpu2")
    f = b / "payloads" / "vllm-mtp-c1.json"
    doc = json.loads(f.read_text())
    accept_400(doc)
    f.write_text(json.dumps(doc))
    write_sums(b)
    cmp = compare_hosts([a, b])
    assert any("vllm-mtp-c1.json" in m and "contradicts" in m for m in cmp.missing)
    row = next(r for r in cmp.rows if r.config == "vllm-mtp")
    assert [c.run is None for c in row.cells] == [False, True]  # gpu2's is used for nothing
