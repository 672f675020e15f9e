"""One run folder is one run, and compare compares like with like (issue 47, classes 3 and 4).

- Every payload ran on hardware.json's machine and measured the lock's workload (prompt set
  name and sha256, sampling, template kwargs, max tokens, target model, speculative depth), and
  the other payloads' (a speedup's baseline included): else exit 2 naming the payload and field.
- A payload that disagrees with SHA256SUMS is used for no figure and named at the top of the
  report; so is a file SHA256SUMS does not list; publish refuses both.
- compare: hardware and software may differ, workload fields may not; the refusal names each.

On main 101bc6e every one of these folders was reported (exit 0) or compared as "the same
workload"."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from report_factory import (
    HARDWARE,
    Spec,
    jitter,
    seed_matrix,
    set_hardware,
    write_artifacts,
    write_sums,
)

from bench.cli import main
from bench.core import InputError
from bench.report import compare_hosts
from bench.schema import ChatTemplateRecord, Payload, RunLock, write_payload

pytestmark = pytest.mark.unit

Doc = dict[str, Any]


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


def real_run(root: Path) -> Path:
    return write_artifacts(root, seed_matrix(simulated=False, sweep=False))


def edit_payload(art: Path, name: str, change: Callable[[Doc], None], sums: bool = True) -> None:
    f = art / "payloads" / name
    doc = json.loads(f.read_text())
    change(doc)
    f.write_text(json.dumps(doc))
    if sums:
        write_sums(art)


def _workload(d: Doc) -> Doc:
    wl: Doc = d["evidence"]["workload"]
    return wl


def another_prompt_set(d: Doc) -> None:
    _workload(d)["prompt_set"] = {
        "name": "other-set", "sha256": "a" * 64, "source": "x.jsonl", "prompts": {"code": 1}
    }  # fmt: skip


def another_temperature(d: Doc) -> None:
    _workload(d)["temperature"] = 0.7
    d["engineFlags"]["temperature"] = 0.7


def thinking_on(d: Doc) -> None:
    _workload(d)["chat_template"] = {
        "kwargs": {"enable_thinking": True}, "enable_thinking": True, "source": "t"
    }  # fmt: skip


def another_target(d: Doc) -> None:
    d["hfId"] = "someone/Another-Model-GPTQ"


def another_depth(d: Doc) -> None:
    d["engineFlags"]["specNumTokens"] = 5


LOCK_CASES: dict[str, tuple[Callable[[Doc], None], str]] = {
    "another prompt set": (another_prompt_set, "prompt set"),
    "another temperature": (another_temperature, "temperature"),
    "thinking on where the lock has it unset": (thinking_on, "chat template kwargs"),
    "another target model": (another_target, "target model"),
    "another speculative depth": (another_depth, "speculative depth"),
}


@pytest.mark.parametrize("case", sorted(LOCK_CASES))
def test_a_payload_of_another_workload_than_the_lock_is_refused(tmp_path: Path, case: str) -> None:
    change, field = LOCK_CASES[case]
    art = real_run(tmp_path / "run")
    edit_payload(art, "vllm-mtp-c1.json", change)
    code, text = cli("report", str(art), "--out", str(tmp_path / "r"))
    assert code == 2, text
    assert f"vllm-mtp-c1.json: {field}" in text and "experiment.lock.json" in text, text
    assert not (tmp_path / "r").exists()


def test_a_baseline_of_another_workload_is_refused_without_a_lock(tmp_path: Path) -> None:
    """A folder of `specbench run` payloads has no lock: its payloads hold each other to one
    workload, so that no speedup sets two workloads side by side."""
    specs = [
        *seed_matrix(simulated=False, sweep=False),
        Spec("vllm-baseline", "vllm", "NONE", jitter(50.0), jitter(60.0), acceptance=None,
             simulated=False),
    ]  # fmt: skip
    art = write_artifacts(tmp_path / "run", specs)
    (art / "experiment.lock.json").unlink()
    edit_payload(art, "vllm-baseline-c1.json", thinking_on)
    code, text = cli("report", str(art), "--out", str(tmp_path / "r"))
    assert code == 2 and "vllm-baseline-c1.json: chat template kwargs" in text, text
    assert "one run folder is one workload" in text


def test_a_payload_of_another_machine_is_refused(tmp_path: Path) -> None:
    art = real_run(tmp_path / "run")
    other = HARDWARE.model_copy(update={"gpuName": "NVIDIA H200", "vramGb": 282.0})
    f = art / "payloads" / "sglang-mtp-c1.json"
    p = Payload.model_validate_json(f.read_text())
    write_payload(f, p.model_copy(update={"hardware": other}))
    write_sums(art)
    code, text = cli("report", str(art), "--out", str(tmp_path / "r"))
    assert code == 2 and "sglang-mtp-c1.json: hardware" in text and "NVIDIA H200" in text, text


def test_a_payload_that_disagrees_with_sha256sums_is_named_first_and_not_used(
    tmp_path: Path,
) -> None:
    art = real_run(tmp_path / "run")
    edit_payload(art, "vllm-mtp-c1.json", lambda d: d.update(notes="edited"), sums=False)
    code, text = cli("report", str(art), "--out", str(tmp_path / "r"))
    assert code == 0, text
    report = (tmp_path / "r" / "REPORT.md").read_text()
    top = report.split("\n# ", 1)[0]
    assert "NOT USED FOR ANY FIGURE" in top and "payloads/vllm-mtp-c1.json" in top
    assert "differs from its SHA256SUMS entry" in top
    # not ranked: no vLLM + MTP figure in the results
    assert "| vLLM + MTP |" not in report
    code, text = cli("publish", str(art), "--out", str(tmp_path / "bundle"))
    assert code == 2 and "vllm-mtp-c1.json" in text and "SHA256SUMS" in text, text


def test_a_file_sha256sums_does_not_list_is_named_and_refused_by_publish(tmp_path: Path) -> None:
    art = real_run(tmp_path / "run")
    (art / "logs" / "extra.log").write_text("added by hand\n")
    code, text = cli("report", str(art), "--out", str(tmp_path / "r"))
    assert code == 0, text
    top = (tmp_path / "r" / "REPORT.md").read_text().split("\n# ", 1)[0]
    assert "logs/extra.log: not listed in SHA256SUMS" in top
    code, text = cli("publish", str(art), "--out", str(tmp_path / "bundle"))
    assert code == 2 and "logs/extra.log: not listed in SHA256SUMS" in text, text
    # an unlisted payload is used for no figure either
    (art / "logs" / "extra.log").unlink()
    src = art / "payloads" / "vllm-mtp-c1.json"
    (art / "payloads" / "vllm-mtp-c1.retry.json").write_bytes(src.read_bytes())
    code, text = cli("report", str(art), "--out", str(tmp_path / "r2"))
    top = (tmp_path / "r2" / "REPORT.md").read_text().split("\n# ", 1)[0]
    assert "payloads/vllm-mtp-c1.retry.json" in top and "not listed in SHA256SUMS" in top


def test_a_matrix_folder_without_sha256sums_cannot_be_published(tmp_path: Path) -> None:
    art = real_run(tmp_path / "run")
    (art / "SHA256SUMS").unlink()
    code, text = cli("publish", str(art), "--out", str(tmp_path / "bundle"))
    assert code == 2 and "SHA256SUMS is missing" in text, text


# -- compare -------------------------------------------------------------------------------------


def _rewrite(art: Path, payload: Callable[[Payload], Payload], lock: Callable[[Doc], None]) -> None:
    """One coherent change to a run: every payload and the lock alike, SHA256SUMS again."""
    for f in sorted((art / "payloads").glob("*.json")):
        write_payload(f, payload(Payload.model_validate_json(f.read_text())))
    doc = json.loads((art / "experiment.lock.json").read_text())
    lock(doc)
    (art / "experiment.lock.json").write_text(
        RunLock.model_validate(doc).model_dump_json(by_alias=True)
    )
    write_sums(art)


def _thinking(p: Payload) -> Payload:
    tpl = ChatTemplateRecord(kwargs={"enable_thinking": True}, enable_thinking=True, source="t")
    wl = p.evidence.workload.model_copy(update={"chat_template": tpl})
    flags = p.engineFlags
    if p.evidence.run.config_name == "vllm-mtp":
        flags = flags.model_copy(update={"specNumTokens": 3})
    return p.model_copy(
        update={"evidence": p.evidence.model_copy(update={"workload": wl}), "engineFlags": flags}
    )


def _thinking_lock(doc: Doc) -> None:
    exp = doc["experiment"]
    exp["workload"]["enable_thinking"] = True
    for c in exp["configurations"]:
        if c["name"] == "vllm-mtp":
            c["spec_num_tokens"] = 3
            c["args"] = [
                a.replace('"num_speculative_tokens":2', '"num_speculative_tokens":3')
                for a in c["args"]
            ]


def test_compare_names_every_workload_field_that_differs(tmp_path: Path) -> None:
    a = real_run(tmp_path / "gpu1")
    b = real_run(tmp_path / "gpu2")
    _rewrite(b, _thinking, _thinking_lock)
    cli("report", str(b), "--out", str(tmp_path / "rb"))  # one run, by itself
    with pytest.raises(InputError) as err:
        compare_hosts([a, b])
    msg = err.value.reason
    assert "2 field(s)" in msg and "chat template kwargs" in msg, msg
    assert "vllm-mtp speculative depth: 3 on gpu2, 2 on gpu1" in msg, msg


def test_compare_lets_hardware_and_software_differ(tmp_path: Path) -> None:
    a = real_run(tmp_path / "gpu1")
    b = real_run(tmp_path / "gpu2")
    set_hardware(b, HARDWARE.model_copy(update={"gpuName": "NVIDIA H200", "vramGb": 282.0}))
    _rewrite(b, lambda p: p.model_copy(update={"engineVersion": "0.99"}), lambda d: None)
    cmp = compare_hosts([a, b])
    assert cmp.rows and not cmp.missing


def test_another_file_that_differs_from_sha256sums_is_named_first(tmp_path: Path) -> None:
    """The lock, hardware.json, provenance, the logs: what the figures are read with."""
    art = real_run(tmp_path / "run")
    prov = art / "provenance.json"
    prov.write_text(json.dumps({"git": {"sha": "edited afterwards"}}))
    code, text = cli("report", str(art), "--out", str(tmp_path / "r"))
    assert code == 0, text
    top = (tmp_path / "r" / "REPORT.md").read_text().split("\n# ", 1)[0]
    assert "provenance.json: differs from its SHA256SUMS entry" in top
    code, text = cli("publish", str(art), "--out", str(tmp_path / "bundle"))
    assert code == 2 and "provenance.json: differs from its SHA256SUMS entry" in text, text
