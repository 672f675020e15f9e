"""The property tier (issue 42): generated experiments, pins locks, payloads, manifests
(SHA256SUMS) and option values fed to the commands that read them, in-process. Whatever the
input, the answer is a result (exit 0, or 1 where a command's contract says the input was
checked and found wrong), or a user error (exit 2) that names what is wrong: never a
traceback or an internal error, and no file touched outside the command's output folder.

Seeded (derandomize: the same examples on every run) and bounded; the stream and /metrics
parsers have their own file (test_property_streams.py).
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bench.commands.matrix as matrix_cmd
from bench.cli import main
from bench.commands._params import Number
from bench.core import (
    DRAFT_NOISE,
    MEMORY_FRACTION,
    NON_NEGATIVE,
    POSITIVE,
    SAMPLE_INTERVAL_S,
    SAMPLE_SECONDS,
    TIME_SCALE,
    TIMEOUT_S,
    InputError,
    Range,
)
from bench.engines import load_experiment
from bench.schema import Resolved, lock_path_for, read_lock, record_pins, write_lock
from bench.schema._experiment import EXPERIMENTS_DIR

REPO = Path(__file__).resolve().parents[2]
SEED = EXPERIMENTS_DIR / "qwen38-27b-gptq-2x3090.yaml"
PAYLOAD = REPO / "tests/fixtures/payloads/vllm-dflash-c1.json"

#: every example is the same on every run; no example database is written into the tree
PROPERTY = settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=80,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# -- running a command ---------------------------------------------------------------------


def cli(*args: str) -> tuple[int, str]:
    """``specbench ARGS`` in this process: (exit code, stdout + stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return code, out.getvalue() + err.getvalue()


def tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every path under ``root`` with its size and mtime (what 'touched' is measured by)."""
    out: dict[str, tuple[int, int]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            st_ = p.lstat()
            out[str(p.relative_to(root))] = (st_.st_size, st_.st_mtime_ns)
    return out


def assert_clean(code: int, text: str, allowed: set[int]) -> None:
    assert code in allowed, (code, text)
    assert "internal error" not in text, text
    assert "Traceback" not in text, text
    if code == 2:
        assert "error" in text.lower() or "Invalid value" in text, text


@contextlib.contextmanager
def sandbox() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="specbench-prop-") as tmp:
        yield Path(tmp)


def run_in(root: Path, out: str | None, *args: str) -> tuple[int, str]:
    """Run the command; every change under ``root`` must lie inside ``root/out``."""
    before = tree(root)
    code, text = cli(*args)
    after = tree(root)
    changed = {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}
    outside = {p for p in changed if out is None or not (p == out or p.startswith(out + "/"))}
    assert not outside, (outside, text)
    return code, text


# -- generated values ----------------------------------------------------------------------

NUMBERS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.sampled_from([0, -1, 1, 0.5, 1.5, 10**20, 1e308, -1e-300]),
)
SCALARS = st.one_of(
    NUMBERS, st.booleans(), st.none(), st.text(max_size=12), st.just("../x"), st.just("/abs")
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside a parsed document."""
    out = [prefix] if prefix else []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out.extend(_paths(v, (*prefix, k)))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out.extend(_paths(v, (*prefix, i)))
    return out


@st.composite
def mutated(draw: st.DrawFn, base: Any, numbers_only: bool = False) -> Any:
    """``base`` with one to three values replaced (or removed), anywhere in it."""
    doc = copy.deepcopy(base)
    paths = _paths(doc)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(paths))
        node = doc
        try:
            for key in path[:-1]:
                node = node[key]
            if draw(st.integers(0, 9)) == 0 and isinstance(node, dict):
                node.pop(path[-1], None)
            else:
                node[path[-1]] = draw(NUMBERS if numbers_only else VALUES)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation replaced a parent
    return doc


def _yaml(doc: Any) -> str:
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)


def _json(doc: Any) -> str:
    # NaN/Infinity written as the literals Python's json writes: the reader must refuse them
    return json.dumps(doc, allow_nan=True)


SEED_DOC = yaml.safe_load(SEED.read_text())
PAYLOAD_DOC = json.loads(PAYLOAD.read_text())


def _numeric_paths(doc: Any) -> list[tuple[Any, ...]]:
    paths = []
    for p in _paths(doc):
        node = doc
        for k in p:
            node = node[k]
        if isinstance(node, (int, float)) and not isinstance(node, bool):
            paths.append(p)
    return paths


# -- the experiment and its pins lock, through `plan` -----------------------------------------


def _lock_doc() -> Any:
    """A valid pins lock of the seed experiment (one host), as a YAML document."""
    with sandbox() as root:
        exp_file = root / "seed.yaml"
        exp_file.write_text(SEED.read_text())
        exp = load_experiment(exp_file)
        path = lock_path_for(exp_file)
        d = {c: "sha256:" + c * 64 for c in "abc"}
        found = Resolved(
            image_digests={"vllm": d["a"], "sglang-stock": d["b"]},
            base_digests={"sglang": d["b"]},
            image_ids={"sglang": d["c"]},
            model_revisions={"target": "1" * 40, "dflash-draft": "2" * 40},
        )
        write_lock(path, record_pins(exp, read_lock(path, exp.name), "gpu1", found, path))
        return yaml.safe_load(path.read_text())


LOCK_DOC = _lock_doc()


def _plan(experiment: str, lock: str | None) -> tuple[int, str]:
    with sandbox() as root:
        exp = root / "exp.yaml"
        exp.write_text(experiment)
        if lock is not None:
            lock_path_for(exp).write_text(lock)
        return run_in(root, None, "plan", str(exp), "--pins-host", "gpu1")


def test_the_unmutated_inputs_are_accepted() -> None:
    code, text = _plan(_yaml(SEED_DOC), _yaml(LOCK_DOC))
    assert code == 0, text
    assert "@sha256:" + "a" * 64 in text  # the lock's pins were applied


@PROPERTY
@given(mutated(SEED_DOC))
def test_plan_of_a_generated_experiment(doc: Any) -> None:
    code, text = _plan(_yaml(doc), None)
    assert_clean(code, text, {0, 2})


@PROPERTY
@given(mutated(SEED_DOC, numbers_only=True))
def test_plan_of_an_experiment_with_generated_numbers(doc: Any) -> None:
    code, text = _plan(_yaml(doc), None)
    assert_clean(code, text, {0, 2})
    if code == 0:
        # a number the plan accepted is finite: NaN, +-inf are refused wherever they stand
        for p in _numeric_paths(doc):
            node = doc
            for k in p:
                node = node[k]
            assert not (isinstance(node, float) and not math.isfinite(node)), (p, node)


@PROPERTY
@given(mutated(LOCK_DOC))
def test_plan_with_a_generated_pins_lock(doc: Any) -> None:
    code, text = _plan(_yaml(SEED_DOC), _yaml(doc))
    assert_clean(code, text, {0, 2})


@settings(PROPERTY, max_examples=50)
@given(st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
def test_plan_of_arbitrary_bytes(data: bytes) -> None:
    with sandbox() as root:
        exp = root / "exp.yaml"
        exp.write_bytes(data)
        code, text = run_in(root, None, "plan", str(exp))
    assert_clean(code, text, {2})


# -- payloads, through `validate` --------------------------------------------------------------


def _validate(text: str) -> tuple[int, str]:
    with sandbox() as root:
        p = root / "p.json"
        p.write_text(text)
        return run_in(root, None, "validate", str(p))


@PROPERTY
@given(mutated(PAYLOAD_DOC))
def test_validate_a_generated_payload(doc: Any) -> None:
    code, text = _validate(_json(doc))
    # validate's contract: 0 valid, 1 a payload checked and found wrong, 2 unreadable
    assert_clean(code, text, {0, 1, 2})


@PROPERTY
@given(mutated(PAYLOAD_DOC, numbers_only=True))
def test_a_payload_with_a_number_that_is_not_one_is_never_valid(doc: Any) -> None:
    code, text = _validate(_json(doc))
    assert_clean(code, text, {0, 1, 2})
    bad = [
        p
        for p in _numeric_paths(doc)
        if isinstance(_at(doc, p), float) and not math.isfinite(_at(doc, p))
    ]
    if bad:
        assert code != 0, (bad, text)


def _at(doc: Any, path: tuple[Any, ...]) -> Any:
    for k in path:
        doc = doc[k]
    return doc


@PROPERTY
@given(st.data())
def test_chunk_times_out_of_order_never_validate(data: st.DataObject) -> None:
    doc = copy.deepcopy(PAYLOAD_DOC)
    req = doc["evidence"]["iterations"][1]["requests"][0]
    times = req["chunk_times"]
    i = data.draw(st.integers(1, len(times) - 1))
    back = data.draw(st.floats(min_value=1e-9, max_value=1.0))
    times[i] = times[i - 1] - back
    if times[i] < 0:
        times[i] = 0.0
        times[i - 1] = max(times[i - 1], 1e-6)
    code, text = _validate(_json(doc))
    assert code == 1, text
    assert "$.evidence.iterations[1].requests[0].chunk_times" in text


# -- manifests (SHA256SUMS), through `verify-bundle` -------------------------------------------

NAMES = st.one_of(
    st.sampled_from(
        ["REPORT.md", "a.txt", "../outside.txt", "/etc/hostname", "a/../a.txt", "sub/b.txt", ""]
    ),
    st.text(min_size=1, max_size=12),
)


@PROPERTY
@given(
    st.lists(st.tuples(st.one_of(st.text(max_size=70), st.just("0" * 64)), NAMES), max_size=6),
    st.lists(st.text(max_size=30), max_size=3),
)
def test_verify_bundle_of_a_generated_manifest(
    lines: list[tuple[str, str]], junk: list[str]
) -> None:
    with sandbox() as root:
        bundle = root / "bundle"
        (bundle / "sub").mkdir(parents=True)
        (bundle / "a.txt").write_text("a\n")
        (bundle / "sub" / "b.txt").write_text("b\n")
        (root / "outside.txt").write_text("not in the bundle\n")
        body = "\n".join([f"{h}  {n}" for h, n in lines] + junk)
        (bundle / "SHA256SUMS").write_text(body, encoding="utf-8", errors="surrogatepass")
        code, text = run_in(root, None, "verify-bundle", str(bundle))
    # verify-bundle's contract: 0 intact, 1 problems listed, 2 unreadable input
    assert_clean(code, text, {1, 2})


# -- option values, through the option parser and the command line -----------------------------

OPTIONS: list[tuple[str, str, Range]] = [
    ("demo", "--time-scale", TIME_SCALE),
    ("matrix", "--time-scale", TIME_SCALE),
    ("matrix", "--ready-timeout", TIMEOUT_S),
    ("emulate", "--time-scale", TIME_SCALE),
    ("run", "--temperature", NON_NEGATIVE),
    ("run", "--request-timeout", TIMEOUT_S),
    ("run", "--gpu-mem-util", MEMORY_FRACTION),
    ("tiny-model", "--draft-noise", DRAFT_NOISE),
    ("telemetry-sample", "--seconds", SAMPLE_SECONDS),
    ("telemetry-sample", "--interval", SAMPLE_INTERVAL_S),
    ("roofline", "--weights-gb", POSITIVE),
    ("roofline", "--context", NON_NEGATIVE),
]
OPTION_TEXT = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(min_value=-(10**25), max_value=10**25).map(str),
    st.sampled_from(
        ["inf", "-inf", "nan", "NaN", "1e999", "-0", "0x10", "1_0", " 1", "", "1e-400"]
    ),
    st.text(max_size=8),
)


@PROPERTY
@given(st.sampled_from(range(len(OPTIONS))), OPTION_TEXT)
def test_a_numeric_option_value_is_in_range_or_refused(which: int, text: str) -> None:
    _, _, rng = OPTIONS[which]
    parse = Number(rng)
    try:
        value = parse(text)
    except ValueError as err:  # pydantic's custom error: typer's BadParameter for the option
        assert "is not" in str(err)
        return
    assert math.isfinite(value) and rng.problem(value) is None


@settings(PROPERTY, max_examples=60)
@given(st.sampled_from(range(len(OPTIONS))), OPTION_TEXT)
def test_a_numeric_option_on_the_command_line(which: int, text: str) -> None:
    command, flag, rng = OPTIONS[which]
    with sandbox() as root, _no_command_runs():
        # the option first: it is parsed before the missing arguments are noticed
        code, out = run_in(root, None, *command.split(), f"{flag}={text}")
    assert_clean(code, out, {2})
    try:
        refused = rng.problem(float(text.strip())) is not None
    except ValueError:
        refused = True
    if refused:
        assert f"Invalid value for '{flag}'" in " ".join(out.replace("│", " ").split()), out
    else:
        assert f"Invalid value for '{flag}'" not in out, out


@contextlib.contextmanager
def _no_command_runs() -> Iterator[None]:
    """Commands that need no argument would start working with a good value: stop them."""

    def stop(*_: object, **__: object) -> None:
        raise InputError("(test)", "the options were accepted; the command would run now")

    saved: list[tuple[Any, str, Callable[..., Any]]] = [
        (matrix_cmd, "run_demo", matrix_cmd.run_demo),
    ]
    import bench.commands.hardware as hw_cmd

    saved.append((hw_cmd, "Sampler", hw_cmd.Sampler))
    for mod, name, _ in saved:
        setattr(mod, name, stop)
    try:
        yield
    finally:
        for mod, name, orig in saved:
            setattr(mod, name, orig)


@pytest.mark.parametrize("flag", ["--time-scale=inf", "--time-scale=1e999"])
def test_demo_with_an_infinite_time_scale_returns_at_once(flag: str) -> None:
    # it hung before (issue 42): the refusal comes from the option parser, nothing runs
    with sandbox() as root:
        code, text = run_in(root, "d", "demo", "--out", str(root / "d"), flag)
    assert code == 2 and "--time-scale" in text


# -- run folders, through `report` (every write inside --out) ---------------------------------


def _run_folder(root: Path) -> Path:
    from report_factory import seed_matrix, write_artifacts

    return write_artifacts(root / "run", seed_matrix(simulated=True, sweep=False))


with tempfile.TemporaryDirectory(prefix="specbench-prop-run-") as _tmp:
    _RUN = _run_folder(Path(_tmp))
    RUN_FILES = {
        str(p.relative_to(_RUN)): p.read_bytes() for p in sorted(_RUN.rglob("*")) if p.is_file()
    }
PAYLOAD_NAMES = sorted(n for n in RUN_FILES if n.startswith("payloads/"))


@settings(PROPERTY, max_examples=30)
@given(st.sampled_from(PAYLOAD_NAMES), st.data())
def test_report_of_a_run_folder_with_a_generated_payload(name: str, data: st.DataObject) -> None:
    doc = json.loads(RUN_FILES[name])
    bad = data.draw(mutated(doc, numbers_only=data.draw(st.booleans())))
    with sandbox() as root:
        run = root / "run"
        for rel, content in RUN_FILES.items():
            (run / rel).parent.mkdir(parents=True, exist_ok=True)
            (run / rel).write_bytes(content)
        (run / name).write_text(_json(bad))
        code, text = run_in(root, "out", "report", str(run), "--out", str(root / "out"))
    assert_clean(code, text, {0, 1, 2})
