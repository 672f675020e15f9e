"""The generative tier (issue 47, class 10): from valid run folders the demo writes (the
emulator; relabelled real and pinned so that `publish` reaches the checks under test), a seeded
Hypothesis strategy applies one mutation of a catalogue (field edits that break each invariant
of bench/schema/_invariants.py, files swapped between two runs, a payload of another
experiment, truncations, type swaps, SHA256SUMS drift, another machine, another lock), with or
without SHA256SUMS written again over the change (a hostile file re-signs its edit). Then every
command that reads a run folder runs on it:

- `validate` answers 0, or 1 naming the file and the JSON path of each problem (its contract);
  a payload it finds contradicted is one the report does not use, and the reverse;
- `report`, `compare` and `publish` either refuse with exit 2 naming the folder or a file in it
  and the field, or write a document in which no figure contradicts the mutated evidence: every
  payload the report uses has its decode figure recomputed here from its raw requests' token
  times (independently of bench/), and no forged value is printed except where the payload that
  carries it is named as not used. A published bundle holds no payload it could not use.

Seeded (derandomize), a fixed number of examples, in `make test` through the unit tier; about
30 s on an idle 2-core machine (the demo runs included).
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from demo_seed import as_real, categories_run, second_seed_run, seed_run, write_sums
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from bench.cli import main

pytestmark = pytest.mark.unit

GENERATIVE = settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=20,
    # no shrinking: a failure is reported as drawn (its draws are printed), within the budget
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

Doc = dict[str, Any]
Draw = Callable[[st.SearchStrategy[Any]], Any]


# -- the seed folders ----------------------------------------------------------------------


class Seeds:
    """Real-labelled copies of the demo's run folders, made once per test process."""

    _dir: Path | None = None

    @classmethod
    def folder(cls, name: str, make: Callable[[], Path]) -> Path:
        if cls._dir is None:
            cls._dir = Path(tempfile.mkdtemp(prefix="specbench-generative-"))
        dest = cls._dir / name
        return dest if dest.exists() else as_real(make(), dest)


def seed_a() -> Path:
    return Seeds.folder("a", seed_run)


def seed_b() -> Path:
    return Seeds.folder("b", second_seed_run)


def seed_c() -> Path:
    return Seeds.folder("c", categories_run)


# -- mutations -----------------------------------------------------------------------------


@dataclass
class Mutation:
    what: str
    forged: str | None = None  # a value as a report prints it, which it must not print


def _payloads(art: Path) -> list[Path]:
    return sorted((art / "payloads").glob("*.json"))


def _load(f: Path) -> Doc:
    doc: Doc = json.loads(f.read_text())
    return doc


def _save(f: Path, doc: Doc) -> None:
    f.write_text(json.dumps(doc, indent=2) + "\n")


def _pick_payload(art: Path, draw: Draw, spec_only: bool = False) -> tuple[Path, Doc]:
    files = [f for f in _payloads(art) if not spec_only or "baseline" not in f.name]
    f = draw(st.sampled_from(files))
    return f, _load(f)


def _measured(doc: Doc) -> list[Doc]:
    return [it for it in doc["evidence"]["iterations"] if not it["warmup"]]


def m_acceptance_rate(art: Path, draw: Draw) -> Mutation:
    f, doc = _pick_payload(art, draw, spec_only=True)
    rate = draw(st.floats(1.01, 50.0))
    doc["evidence"]["acceptance"]["acceptance_rate"] = rate
    _save(f, doc)
    return Mutation(f"{f.name}: acceptance_rate {rate}", f"{rate * 100:.2f}%")


def m_accepted_over_drafted(art: Path, draw: Draw) -> Mutation:
    f, doc = _pick_payload(art, draw, spec_only=True)
    it = draw(st.sampled_from(_measured(doc)))
    it["acceptance"]["accepted_tokens"] = it["acceptance"]["draft_tokens"] + draw(
        st.integers(1, 99)
    )
    _save(f, doc)
    return Mutation(f"{f.name}: accepted over drafted")


def m_window(art: Path, draw: Draw) -> Mutation:
    f, doc = _pick_payload(art, draw)
    it = draw(st.sampled_from(_measured(doc)))
    if draw(st.booleans()):
        it["window_end"] = it["window_start"] - draw(st.floats(0.001, 100.0))
        return _saved(f, doc, "window ends before it starts")
    it["requests"] = []
    return _saved(f, doc, "a measured window without requests")


def _saved(f: Path, doc: Doc, what: str, forged: str | None = None) -> Mutation:
    _save(f, doc)
    return Mutation(f"{f.name}: {what}", forged)


def m_tokens(art: Path, draw: Draw) -> Mutation:
    f, doc = _pick_payload(art, draw)
    r = draw(st.sampled_from(draw(st.sampled_from(_measured(doc)))["requests"]))
    r["completion_tokens"] = draw(st.integers(17, 100_000))
    return _saved(f, doc, f"completion_tokens {r['completion_tokens']} at max_tokens 16")


SUMMARY_FIELDS = ("mean", "stddev", "median", "min", "max", "ci95_low", "ci95_high")


def m_summary(art: Path, draw: Draw) -> Mutation:
    f, doc = _pick_payload(art, draw)
    figure = draw(st.sampled_from(["decode_tok_s", "ttft_ms", "aggregate_tok_s", "e2e_ms"]))
    field = draw(st.sampled_from(SUMMARY_FIELDS))
    value = draw(st.floats(1e5, 1e7))
    doc["evidence"]["figures"][figure][field] = value
    if figure == "decode_tok_s" and field == "mean":
        doc["tokSOut"] = value
    return _saved(f, doc, f"figures.{figure}.{field} = {value}", f"{value:.2f}")


def m_headline(art: Path, draw: Draw) -> Mutation:
    f, doc = _pick_payload(art, draw)
    value = draw(st.floats(1e5, 1e7))
    key = draw(st.sampled_from(["tokSOut", "ttftMs", "samples"]))
    doc[key] = [value, *doc["samples"][1:]] if key == "samples" else value
    return _saved(f, doc, f"{key} forged", f"{value:.2f}")


def m_snapshot(art: Path, draw: Draw) -> Mutation:
    f, doc = _pick_payload(art, draw, spec_only=True)
    it = draw(st.sampled_from(_measured(doc)))
    values = it["acceptance"]["after"]["values"]
    key = draw(st.sampled_from(sorted(k for k in values if "total" in k)))
    values[key] += draw(st.integers(1, 1000))
    return _saved(f, doc, f"snapshot {key} changed, figures kept")


def m_rates(art: Path, draw: Draw) -> Mutation:
    f, doc = _pick_payload(art, draw)
    it = draw(st.sampled_from(_measured(doc)))
    factor = draw(st.floats(1.5, 100.0))
    if draw(st.booleans()):
        it["per_stream_mean_tok_s"] *= factor
        return _saved(f, doc, "per_stream_mean_tok_s scaled", f"{it['per_stream_mean_tok_s']:.2f}")
    it["requests"][0]["decode_tok_s"] *= factor
    return _saved(f, doc, "a request's decode_tok_s scaled")


def m_flags(art: Path, draw: Draw) -> Mutation:
    f, doc = _pick_payload(art, draw, spec_only=True)
    fl = doc["engineFlags"]
    fl["specAcceptedTokens"] = fl["specDraftTokens"] - draw(st.integers(1, 5))
    return _saved(f, doc, "engineFlags.specAcceptedTokens forged")


def m_categories(art: Path, draw: Draw) -> Mutation:
    """On the categories run only (others have no categories: this edits a category field)."""
    f, doc = _pick_payload(art, draw, spec_only=True)
    cats = doc["evidence"].get("categories", [])
    if not cats:
        return m_summary(art, draw)
    c = draw(st.sampled_from(cats))
    kind = draw(st.sampled_from(["decode", "agrees", "request", "name"]))
    if kind == "decode":
        value = draw(st.floats(1e5, 1e7))
        c["decode_tok_s"]["mean"] = value
        return _saved(f, doc, f"category {c['category']} decode forged", f"{value:.2f}")
    if kind == "agrees" and c.get("request_acceptance"):
        c["request_acceptance"]["agrees_with_counters"] = not c["request_acceptance"][
            "agrees_with_counters"
        ]
        return _saved(f, doc, f"category {c['category']} agrees flag flipped")
    it = next(i for i in _measured(doc) if i.get("category") == c["category"])
    if kind == "request" and it["requests"][0].get("spec_tokens"):
        it["requests"][0]["spec_tokens"]["accepted_tokens"] += draw(st.integers(1, 9))
        return _saved(f, doc, "a request's own accepted count changed")
    it["category"] = "poetry"
    for r in it["requests"]:
        r["category"] = "poetry"
    return _saved(f, doc, "a category the prompt set has not")


def m_swap(art: Path, draw: Draw) -> Mutation:
    other = seed_b() if draw(st.booleans()) else seed_c()
    src = draw(st.sampled_from(_payloads(other)))
    dest = art / "payloads" / (src.name if draw(st.booleans()) else f"x-{src.name}")
    shutil.copyfile(src, dest)
    return Mutation(f"{src.name} of {other.name} copied in as {dest.name}")


def m_truncate(art: Path, draw: Draw) -> Mutation:
    f = draw(st.sampled_from(_payloads(art)))
    raw = f.read_bytes()
    f.write_bytes(raw[: draw(st.integers(0, len(raw) - 1))])
    return Mutation(f"{f.name} truncated")


TYPE_PATHS = (
    ("tokSOut",),
    ("promptTokens",),
    ("engineFlags", "concurrency"),
    ("evidence", "workload", "max_tokens"),
    ("evidence", "figures", "decode_tok_s"),
    ("evidence", "iterations", 0, "requests", 0, "completion_tokens"),
    ("evidence", "iterations", 0, "window_start"),
    ("evidence", "validity", "valid"),
)


def m_type(art: Path, draw: Draw) -> Mutation:
    f, doc = _pick_payload(art, draw)
    path = draw(st.sampled_from(TYPE_PATHS))
    node: Any = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = draw(st.sampled_from(["fast", [], {}, None, True, -1, 1e308, "NaN"]))
    return _saved(f, doc, f"{'.'.join(map(str, path))} of another type")


def m_sums(art: Path, draw: Draw) -> Mutation:
    sums = art / "SHA256SUMS"
    lines = sums.read_text().splitlines()
    kind = draw(st.sampled_from(["digest", "drop", "extra", "garbage", "remove", "file"]))
    k = draw(st.integers(0, len(lines) - 1))
    if kind == "digest":
        lines[k] = "0" * 64 + lines[k][64:]
    elif kind == "drop":
        del lines[k]
    elif kind == "extra":
        lines.append("1" * 64 + "  payloads/gone-c1.json")
    elif kind == "garbage":
        lines.insert(k, draw(st.text(max_size=40)))
    elif kind == "file":
        (art / "logs" / "added.log").write_text("added by hand\n")
    if kind == "remove":
        sums.unlink()
    else:
        sums.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogatepass")
    return Mutation(f"SHA256SUMS drift: {kind}")


def m_hardware(art: Path, draw: Draw) -> Mutation:
    doc = _load(art / "hardware.json")
    doc["cpu"] = draw(st.sampled_from(["AMD EPYC 9654", "Intel Xeon", "elsewhere"]))
    _save(art / "hardware.json", doc)
    return Mutation("hardware.json of another machine")


def m_lock(art: Path, draw: Draw) -> Mutation:
    doc = _load(art / "experiment.lock.json")
    wl = doc["experiment"]["workload"]
    key = draw(st.sampled_from(["max_tokens", "prompt_tokens", "enable_thinking"]))
    wl[key] = True if key == "enable_thinking" else wl[key] + draw(st.integers(1, 64))
    _save(art / "experiment.lock.json", doc)
    return Mutation(f"lock: workload.{key} changed")


CATALOGUE: dict[str, Callable[[Path, Draw], Mutation]] = {
    "acceptance rate over 1": m_acceptance_rate,
    "accepted over drafted": m_accepted_over_drafted,
    "a window": m_window,
    "tokens over max_tokens": m_tokens,
    "a summary": m_summary,
    "a headline figure": m_headline,
    "a /metrics snapshot": m_snapshot,
    "a rate": m_rates,
    "engine flags": m_flags,
    "a category": m_categories,
    "a file of another run": m_swap,
    "a truncation": m_truncate,
    "a type swap": m_type,
    "SHA256SUMS drift": m_sums,
    "another machine": m_hardware,
    "another lock": m_lock,
}
#: mutations of one payload's content, after which SHA256SUMS may be written again
RESIGNABLE = {n for n in CATALOGUE if n not in ("SHA256SUMS drift",)}


# -- running the commands ------------------------------------------------------------------


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


def _refusal_names_the_folder(code: int, text: str, art: Path, what: str) -> None:
    assert code == 2, (what, code, text)
    assert str(art) in text, (what, text)


def _not_used(report: str) -> set[str]:
    """The payloads a report names as used for no figure (its first block)."""
    top = re.split(r"^# ", report, maxsplit=1, flags=re.MULTILINE)[0]
    return set(re.findall(r"`(payloads/[^`]+\.json)`", top))


def _decode_from_requests(doc: Doc) -> float | None:
    """The decode figure recomputed here from the raw requests: the per-stream mean of
    (completion_tokens - 1) / (last - first token) over valid measured iterations."""
    means = []
    for it in _measured(doc):
        reqs = it["requests"]
        if it.get("reasons") or any(r.get("error") or r.get("reasons") for r in reqs):
            continue
        rates = [
            (r["completion_tokens"] - 1) / (r["last_token_at"] - r["first_token_at"]) for r in reqs
        ]
        means.append(math.fsum(rates) / len(rates))
    return math.fsum(means) / len(means) if means else None


def _printed(value: float, text: str) -> bool:
    return any(f"{value + d:.2f}" in text for d in (0.0, 1e-6, -1e-6))


def check_document(text: str, art: Path, mutation: Mutation) -> None:
    """No figure of ``text`` contradicts the evidence in ``art``."""
    unused = _not_used(text)
    for f in _payloads(art):
        if f"payloads/{f.name}" in unused:
            continue
        decode = _decode_from_requests(_load(f))  # used: it parses, and its figure is printed
        assert decode is None or _printed(decode, text), (mutation.what, f.name, decode)
    if mutation.forged:
        lines = [ln for ln in text.splitlines() if mutation.forged in ln and "payloads/" not in ln]
        assert not lines, (mutation.what, lines)


def check_validate(art: Path, report: str | None, mutation: Mutation) -> None:
    files = _payloads(art)
    code, text = cli("validate", *map(str, files))
    assert code in (0, 1), (mutation.what, text)
    bad = {ln.split(": ", 1)[0] for ln in text.splitlines() if ": error: " in ln}
    assert (code == 1) == bool(bad), text
    contradicted = {
        f"payloads/{Path(b).name}" for b in bad if "run is invalid" not in text.split(b, 1)[1][:200]
    }
    if report is not None:
        # a payload the validator finds wrong is used for no figure
        assert contradicted <= _not_used(report) | {
            u for u in contradicted if "run is invalid" in text
        }, (mutation.what, contradicted, _not_used(report))


def run_everything(art: Path, other: Path | None, mutation: Mutation, tmp: Path) -> None:
    code, text = cli("report", str(art), "--out", str(tmp / "report"))
    report = None
    if code == 0:
        report = (tmp / "report" / "REPORT.md").read_text()
        check_document(report, art, mutation)
    else:
        _refusal_names_the_folder(code, text, art, mutation.what)
    check_validate(art, report, mutation)
    code, text = cli("publish", str(art), "--out", str(tmp / "bundle"))
    if code == 0:
        bundle = (tmp / "bundle" / "REPORT.md").read_text()
        assert not _not_used(bundle), (mutation.what, "a bundle vouches for what it cannot use")
        check_document(bundle, art, mutation)
    else:
        _refusal_names_the_folder(code, text, art, mutation.what)
    if other is not None:
        code, text = cli("compare", str(other), str(art), "--out", str(tmp / "compare"))
        if code == 0:
            compare = (tmp / "compare" / "COMPARE.md").read_text()
            if mutation.forged:
                assert not [
                    ln
                    for ln in compare.splitlines()
                    if mutation.forged in ln and "payloads/" not in ln
                ], mutation.what
        else:
            _refusal_names_the_folder(code, text, art, mutation.what)


@contextlib.contextmanager
def mutated(seed: Path, data: st.DataObject) -> Iterator[tuple[Path, Mutation, Path]]:
    with tempfile.TemporaryDirectory(prefix="specbench-gen-") as tmp:
        art = Path(tmp) / seed.name
        shutil.copytree(seed, art)
        name = data.draw(st.sampled_from(sorted(CATALOGUE)), label="mutation")
        mutation = CATALOGUE[name](art, data.draw)
        if name in RESIGNABLE and data.draw(st.booleans(), label="SHA256SUMS written again"):
            write_sums(art)
        yield art, mutation, Path(tmp)


@GENERATIVE
@given(st.data())
def test_every_command_refuses_or_states_only_what_the_evidence_gives(data: st.DataObject) -> None:
    with mutated(seed_a(), data) as (art, mutation, tmp):
        run_everything(art, seed_b(), mutation, tmp)


@GENERATIVE
@given(st.data())
def test_the_same_on_a_categories_run(data: st.DataObject) -> None:
    with mutated(seed_c(), data) as (art, mutation, tmp):
        run_everything(art, None, mutation, tmp)


def test_the_seeds_themselves_go_through_every_command(tmp_path: Path) -> None:
    """The check can pass: unmutated, every command accepts the seed folders."""
    for seed, other in ((seed_a(), seed_b()), (seed_c(), None)):
        art = shutil.copytree(seed, tmp_path / seed.name)
        run_everything(art, other, Mutation("none"), tmp_path / f"{seed.name}-out")
        assert (tmp_path / f"{seed.name}-out" / "bundle" / "REPORT.md").is_file()
