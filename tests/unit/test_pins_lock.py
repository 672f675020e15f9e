"""The pins lock (issue 29): a first run resolves what the experiment leaves 'unresolved' into
<experiment>.lock.yaml, later runs are pinned to it, a mismatch is refused with the fix, and
each pin's source (experiment, lock, unpinned) reaches the run's lock, the report and publish."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bench.core import InputError
from bench.engines import load_experiment, load_pinned_experiment
from bench.schema import (
    PinsLock,
    Resolved,
    apply_lock,
    forget_pins,
    lock_path_for,
    read_lock,
    record_pins,
    write_lock,
)

REPO = Path(__file__).resolve().parents[2]
SEED = REPO / "bench" / "experiments" / "qwen38-27b-gptq-2x3090.yaml"
D = {c: "sha256:" + c * 64 for c in "abcdef"}
REV = "1" * 40


@pytest.fixture
def exp_file(tmp_path: Path) -> Path:
    dest = tmp_path / "seed.yaml"
    dest.write_text(SEED.read_text())
    return dest


def _found(**kw: dict[str, str]) -> Resolved:
    return Resolved(**kw)  # type: ignore[arg-type]


def test_lock_sits_beside_the_experiment() -> None:
    assert lock_path_for("bench/experiments/x.yaml") == Path("bench/experiments/x.lock.yaml")
    assert lock_path_for("/a/b.yml") == Path("/a/b.lock.yml".replace(".lock.yml", ".lock.yaml"))


def test_first_run_records_and_later_runs_are_pinned(exp_file: Path) -> None:
    exp = load_experiment(exp_file)
    path = lock_path_for(exp_file)
    empty = read_lock(path, exp.name)
    before = apply_lock(exp, empty, "gpu1", path)
    # the GSM8K task's sha256 is written in the experiment; every other pin is left to a run
    assert [(p.kind, p.source) for p in before.pins if p.kind == "url"] == [("url", "experiment")]
    assert {p.source for p in before.pins if p.kind != "url"} == {"unpinned"}
    assert len(before.unpinned) == len(exp.unresolved_pins())

    found = _found(
        image_digests={"vllm": D["a"], "sglang-stock": D["b"]},
        base_digests={"sglang": D["b"]},
        image_ids={"sglang": D["c"]},
        model_revisions={"target": REV, "dflash-draft": "2" * 40},
    )
    lock = record_pins(exp, empty, "gpu1", found, path)
    write_lock(path, lock)
    assert path.read_text().startswith("# specbench pins lock of the experiment")
    again = load_pinned_experiment(exp_file, "gpu1")
    assert again.unpinned == []
    assert {p.source for p in again.pins if p.kind != "url"} == {"lock"}
    assert again.experiment.images["vllm"].ref == f"vllm/vllm-openai:v0.33.0@{D['a']}"
    assert again.experiment.images["sglang"].local_image_id == D["c"]
    assert again.experiment.images["sglang"].build is not None
    assert again.experiment.images["sglang"].build.base_digest == D["b"]
    assert again.experiment.target.revision == REV
    assert again.experiment.unresolved_pins() == []
    # a second host has its own build: only its image ID is unpinned
    other = load_pinned_experiment(exp_file, "gpu2")
    assert [(p.key, p.field) for p in other.unpinned] == [("sglang", "image ID")]


def test_recording_the_same_values_again_changes_nothing(exp_file: Path) -> None:
    exp = load_experiment(exp_file)
    path = lock_path_for(exp_file)
    found = _found(image_digests={"vllm": D["a"]}, model_revisions={"target": REV})
    lock = record_pins(exp, read_lock(path, exp.name), "gpu1", found, path)
    assert record_pins(exp, lock, "gpu1", found, path) == lock


@pytest.mark.parametrize(
    ("found", "message"),
    [
        ({"image_digests": {"vllm": D["d"]}}, "The registry's vllm/vllm-openai:v0.33.0 has moved"),
        ({"base_digests": {"sglang": D["d"]}}, "lmsysorg/sglang:v0.5.19 has moved"),
        ({"image_ids": {"sglang": D["d"]}}, "gpu1's build of specbench/sglang"),
        ({"model_revisions": {"target": "3" * 40}}, "Qwen3.8-27B-GPTQ-4bit@main has moved"),
    ],
)
def test_a_changed_image_or_model_is_refused_with_the_fix(
    exp_file: Path, found: dict[str, dict[str, str]], message: str
) -> None:
    exp = load_experiment(exp_file)
    path = lock_path_for(exp_file)
    first = _found(
        image_digests={"vllm": D["a"]},
        base_digests={"sglang": D["b"]},
        image_ids={"sglang": D["c"]},
        model_revisions={"target": REV},
    )
    lock = record_pins(exp, read_lock(path, exp.name), "gpu1", first, path)
    with pytest.raises(InputError, match=message) as err:
        record_pins(exp, lock, "gpu1", _found(**found), path)
    assert "specbench pins forget <experiment>" in str(err.value)
    # another host's build of the same image is its own pin, not a mismatch
    if "image_ids" in found:
        assert record_pins(exp, lock, "gpu2", _found(**found), path) != lock


def test_one_source_per_pin(exp_file: Path) -> None:
    """A value the experiment fixes wins; a lock entry that disagrees with it is refused, and
    a lock resolved for another tag or repository is stale."""
    doc = yaml.safe_load(exp_file.read_text())
    doc["images"]["vllm"]["digest"] = D["e"]
    exp_file.write_text(yaml.safe_dump(doc))
    exp = load_experiment(exp_file)
    path = lock_path_for(exp_file)
    pinned = apply_lock(exp, read_lock(path, exp.name), "h", path)
    assert next(p for p in pinned.pins if p.key == "vllm").source == "experiment"
    # recording the experiment's own value is a check, not a write
    lock = read_lock(path, exp.name)
    assert record_pins(exp, lock, "h", _found(image_digests={"vllm": D["e"]}), path) == lock
    with pytest.raises(InputError, match="the experiment pins"):
        record_pins(exp, lock, "h", _found(image_digests={"vllm": D["a"]}), path)
    bad = PinsLock.model_validate(
        {
            "experiment": exp.name,
            "images": {"vllm": {"image": "vllm/vllm-openai:v0.33.0", "digest": D["a"]}},
        }
    )
    with pytest.raises(InputError, match="one source per pin") as err:
        apply_lock(exp, bad, "h", path)
    assert "images.vllm.digest" in str(err.value)
    stale = PinsLock.model_validate(
        {"experiment": exp.name, "images": {"vllm": {"image": "vllm/vllm-openai:v0.32.0"}}}
    )
    with pytest.raises(InputError, match=r"resolved for vllm/vllm-openai:v0\.32\.0"):
        apply_lock(exp, stale, "h", path)


def test_forget_moves_a_pin_on_purpose(exp_file: Path) -> None:
    exp = load_experiment(exp_file)
    path = lock_path_for(exp_file)
    found = _found(image_ids={"sglang": D["c"]}, model_revisions={"target": REV})
    lock = record_pins(exp, read_lock(path, exp.name), "gpu1", found, path)
    lock = record_pins(exp, lock, "gpu2", _found(image_ids={"sglang": D["d"]}), path)
    only_gpu1, gone = forget_pins(lock, ["sglang"], [], "gpu1")
    assert gone == ["images.sglang.image_ids.gpu1"]
    assert only_gpu1.images["sglang"].image_ids == {"gpu2": D["d"]}
    none, gone = forget_pins(lock, [], ["target"], None)
    assert "target" not in none.models and gone == ["models.target"]
    with pytest.raises(InputError, match="no entry 'nope'"):
        forget_pins(lock, ["nope"], [], None)


def test_a_bad_lock_file_names_the_field(exp_file: Path) -> None:
    path = lock_path_for(exp_file)
    path.write_text("schema: specbench.pins/1\nexperiment: qwen38-27b-gptq-2x3090\n"
                    "models: {target: {hf_id: a/b, revision: main}}\n")  # fmt: skip
    with pytest.raises(InputError) as err:
        read_lock(path, "qwen38-27b-gptq-2x3090")
    assert "models.target.revision" in str(err.value)
    path.write_text("schema: specbench.pins/1\nexperiment: other\n")
    with pytest.raises(InputError, match="one lock per experiment"):
        read_lock(path, "qwen38-27b-gptq-2x3090")


def _cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bench", "pins", *args],
        input=stdin, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_cli_record_show_forget(exp_file: Path) -> None:
    """What the provisioning roles run on the controller: record (JSON out), show --json."""
    r = _cli("record", str(exp_file), "--host", "gpu1", "--image-id", f"sglang={D['c']}",
             "--model-revision", f"target={REV}")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"changed": True, "lock": str(lock_path_for(exp_file))}
    r = _cli("record", str(exp_file), "--host", "gpu1", "--model-revision", f"target={REV}")
    assert json.loads(r.stdout)["changed"] is False
    r = _cli("record", str(exp_file), "--host", "gpu1", "--image-id", f"sglang={D['d']}")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "images.sglang.image_ids.gpu1" in r.stderr and "pins forget" in r.stderr
    # the experiment document from stdin (an Ansible run's experiment variable)
    doc = json.dumps(yaml.safe_load(exp_file.read_text()))
    r = _cli("show", str(exp_file), "--host", "gpu1", "--json", "--document", "-", stdin=doc)
    assert r.returncode == 0, r.stderr
    shown = json.loads(r.stdout)
    assert shown["images"]["sglang"]["digest"] == D["c"]
    assert "build" not in shown["images"]["vllm"]  # no nulls: Ansible tests `build is defined`
    assert shown["models"]["target"]["revision"] == REV
    assert "vllm/vllm-openai:v0.33.0 (digest)" in shown["unpinned"]
    r = _cli("forget", str(exp_file), "--model", "target")
    assert r.returncode == 0 and "forgot models.target" in r.stdout
    r = _cli("forget", str(exp_file))
    assert r.returncode == 2 and "name at least one entry" in r.stderr


def test_each_kind_of_pin_goes_to_its_own_kind_of_image(exp_file: Path) -> None:
    exp = load_experiment(exp_file)
    path = lock_path_for(exp_file)
    lock = read_lock(path, exp.name)
    for found, message in (
        ({"image_digests": {"sglang": D["a"]}}, "sglang is a local build: give its --image-id"),
        ({"base_digests": {"vllm": D["a"]}}, "vllm is not a local build"),
        ({"image_ids": {"vllm": D["a"]}}, "vllm is pulled, not built"),
        ({"image_digests": {"nope": D["a"]}}, "'nope' is not an image"),
        ({"model_revisions": {"nope": REV}}, "'nope' is not a model"),
        ({"model_revisions": {"target": "main"}}, "'main' is not a 40-hex commit"),
    ):
        with pytest.raises(InputError, match=message):
            record_pins(exp, lock, "h", _found(**found), path)
