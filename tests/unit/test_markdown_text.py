"""Free text into Markdown (issue 47, class 7): escaped the same way in plan, report, compare and
publish (bench/core/_markdown.py), or refused at the schema (a served name is an alias);
control and bidirectional characters neither pass nor silently vanish: they are shown as
<U+XXXX>. On main 101bc6e a newline or '|' in a deviation's reason made a table row of the
plan, and a report heading kept a right-to-left override."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest
import yaml
from markdown_it import MarkdownIt
from report_factory import seed_matrix, write_artifacts, write_sums

from bench.cli import main
from bench.report import md_code, md_fence, md_inline
from bench.schema import EXPERIMENTS_DIR

pytestmark = pytest.mark.unit

HOSTILE = "x\n| forged | row | here | now |\n## forged heading \u202egnp.exe\x1b[31m"


def cli(*args: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue() + err.getvalue()


def _structure(text: str) -> tuple[list[str], int]:
    """Headings and table rows of a Markdown document, as a reader's parser sees them."""
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    headings = [
        tokens[i + 1].content.replace("\\", "")  # as read: the escapes gone
        for i, t in enumerate(tokens)
        if t.type == "heading_open"
    ]
    return headings, sum(1 for t in tokens if t.type == "tr_open")


def _hidden_chars(text: str) -> list[str]:
    return [c for c in text if c in "\u202e\u2066\u200f\x1b\x00"]


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("a\u202eb", "a\\<U+202E\\>b"),
        ("a\x1bb", "a\\<U+001B\\>b"),
        ("a\u2066b\u2069", "a\\<U+2066\\>b\\<U+2069\\>"),
        ("zero\u200bwidth", "zero\\<U+200B\\>width"),
        ("line\u2028sep", "line\\<U+2028\\>sep"),
        ("a|b\nc", "a\\|b c"),
    ],
)
def test_hidden_characters_are_shown_not_passed_or_dropped(text: str, shown: str) -> None:
    assert md_inline(text) == shown
    assert not _hidden_chars(md_code(text)) and not _hidden_chars(md_fence([text]))
    assert "<U+" in md_code(text) or "|" in text


def test_plan_escapes_reasons_and_names(tmp_path: Path) -> None:
    doc = yaml.safe_load((EXPERIMENTS_DIR / "qwen38-27b-gptq-2x3090.yaml").read_text())
    first = doc["configurations"][0]
    first["deviations"] = [{"flag": "--x", "seed": None, "used": "1", "reason": HOSTILE}]
    first["expect_invalid"] = HOSTILE
    exp = tmp_path / "e.yaml"
    exp.write_text(yaml.safe_dump(doc))
    code, plain = cli("plan", str(exp))
    assert code == 0, plain
    doc_clean = yaml.safe_load((EXPERIMENTS_DIR / "qwen38-27b-gptq-2x3090.yaml").read_text())
    doc_clean["configurations"][0]["deviations"] = [
        {"flag": "--x", "seed": None, "used": "1", "reason": "a plain reason."}
    ]
    clean = tmp_path / "c.yaml"
    clean.write_text(yaml.safe_dump(doc_clean))
    _, expected = cli("plan", str(clean))
    got, want = _structure(plain), _structure(expected)
    assert got == want  # no row, no heading made by the text
    assert "forged heading" not in " ".join(got[0])
    assert not _hidden_chars(plain) and "<U+202E>" in plain.replace("\\", "")


@pytest.mark.parametrize("name", ["a|b", "two words", "x\ny", "", "-leading", "\u202eevil"])
def test_a_served_name_is_an_alias(tmp_path: Path, name: str) -> None:
    doc = yaml.safe_load((EXPERIMENTS_DIR / "qwen38-27b-gptq-2x3090.yaml").read_text())
    doc["served_model"] = name
    exp = tmp_path / "e.yaml"
    exp.write_text(yaml.safe_dump(doc))
    code, text = cli("plan", str(exp))
    assert code == 2 and "served_model" in text, text


def _titled(root: Path, title: str) -> Path:
    art = write_artifacts(root, seed_matrix(sweep=False))
    lock = json.loads((art / "experiment.lock.json").read_text())
    lock["experiment"]["title"] = title
    (art / "experiment.lock.json").write_text(json.dumps(lock))
    write_sums(art)
    return art


def test_report_and_compare_show_hidden_characters_in_headings(tmp_path: Path) -> None:
    title = "Fast \u202etsaf\u202c and \x1b[2J clean"
    art = _titled(tmp_path / "gpu1", title)
    code, text = cli("report", str(art), "--out", str(tmp_path / "r"))
    assert code == 0, text
    report = (tmp_path / "r" / "REPORT.md").read_text()
    headings, _ = _structure(report)
    assert "Fast <U+202E>tsaf<U+202C> and <U+001B>[2J clean" in headings
    assert not _hidden_chars(report)
    other = _titled(tmp_path / "gpu2", title)
    code, text = cli("compare", str(art), str(other), "--out", str(tmp_path / "c"))
    assert code == 0, text
    compare = (tmp_path / "c" / "COMPARE.md").read_text()
    assert not _hidden_chars(compare) and "<U+202E>" in _structure(compare)[0][0]
    shutil.rmtree(tmp_path / "c")
