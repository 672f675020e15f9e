"""Issue 37: prompt sets read through the reading layer (exit 2 naming file and line), pinned
by sha256, and named in an experiment (a local file or a pinned dataset)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from bench.core import InputError
from bench.measure import read_prompt_set
from bench.measure._loop import iteration_slots
from bench.measure._promptset import parse_prompt_set
from bench.measure._request import request_body, sampling_record
from bench.measure._runspec import RunSpec
from bench.schema import Hardware
from bench.schema._experiment import PromptSetSpec, WorkloadSpec

GOOD = (
    '{"category": "code", "prompt": "Write Python."}\n'
    "\n"
    '{"category": "prose", "messages": [{"role": "system", "content": "Be brief."}, '
    '{"role": "user", "content": "A poem."}]}\n'
    '{"category": "code", "prompt": "Fix this loop."}\n'
)


def test_a_prompt_set_keeps_categories_in_file_order_and_its_sha256(tmp_path: Path) -> None:
    f = tmp_path / "p.jsonl"
    f.write_text(GOOD, encoding="utf-8")
    ps = read_prompt_set(f, "p", hashlib.sha256(GOOD.encode()).hexdigest(), "f")
    assert ps.categories() == ["code", "prose"]
    assert [i.text() for i in ps.of("code")] == ["Write Python.", "Fix this loop."]
    assert ps.of("prose")[0].chat_messages()[0] == {"role": "system", "content": "Be brief."}
    assert ps.record().prompts == {"code": 2, "prose": 1}


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ('{"category": "code"}', "exactly one of 'messages' and 'prompt'"),
        ('{"category": "Code!", "prompt": "x"}', "category"),
        ('{"category": "code", "prompt": "x", "extra": 1}', "extra"),
        ('{"category": "code", "prompt": "x"', "cannot read JSON"),
        ("[1, 2]", "each line must be a JSON object"),
        (
            '{"category": "c", "messages": [{"role": "assistant", "content": "x"}]}',
            "the last message must be the user's",
        ),
    ],
)
def test_a_bad_line_is_named_by_file_and_line(line: str, why: str) -> None:
    text = '{"category": "code", "prompt": "ok"}\n' + line + "\n"
    with pytest.raises(InputError) as err:
        parse_prompt_set(text, "set.jsonl", "s")
    assert err.value.where.startswith("set.jsonl:2")
    assert why in str(err.value)


@pytest.mark.parametrize("sep", ["\u2028", "\u2029", "\u0085"])
def test_records_end_at_newline_only(sep: str) -> None:
    """The JSON Lines rule (issue 47, class 8): a line break Python's splitlines knows but JSON
    Lines does not is part of the string it is in (main 101bc6e split the record there and
    refused a legal prompt set)."""
    text = (
        '{"category": "code", "prompt": "one' + sep + 'two"}\r\n'
        '{"category": "prose", "messages": [{"role": "user", "content": "a' + sep + 'b"}]}\n'
    )
    ps = parse_prompt_set(text, "set.jsonl", "s")
    assert [i.text() for i in ps.of("code")] == [f"one{sep}two"]
    assert ps.of("prose")[0].chat_messages()[0]["content"] == f"a{sep}b"
    with pytest.raises(InputError) as err:  # a line number still counts '\n' only
        parse_prompt_set(text + "\n{", "set.jsonl", "s")
    assert err.value.where.startswith("set.jsonl:4")


def test_a_changed_file_or_an_unreadable_one_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "p.jsonl"
    f.write_text(GOOD, encoding="utf-8")
    with pytest.raises(InputError) as err:
        read_prompt_set(f, "p", "0" * 64, "workload.prompt_set.sha256")
    assert (
        err.value.where == "workload.prompt_set.sha256" and "the file changed" in err.value.reason
    )
    f.write_bytes(b'{"category": "code", "prompt": "\xff"}\n')
    with pytest.raises(InputError, match="not UTF-8"):
        read_prompt_set(f, "p", None, "x")
    f.write_text("\n\n", encoding="utf-8")
    with pytest.raises(InputError, match="holds no prompt"):
        read_prompt_set(f, "p", None, "x")


def test_the_experiment_names_a_local_file_with_its_sha256_or_a_pinned_dataset() -> None:
    with pytest.raises(ValueError, match="needs its sha256"):
        PromptSetSpec(name="s", path="p.jsonl")
    with pytest.raises(ValueError, match="exactly one of"):
        PromptSetSpec(name="s")
    ds = {"hf_id": "a/b", "revision": "unresolved", "file": "x.jsonl", "sha256": "unresolved"}
    spec = PromptSetSpec.model_validate({"name": "s", "dataset": ds})
    assert spec.dataset is not None and spec.dataset.revision == "unresolved"
    wl = WorkloadSpec.model_validate(
        {
            "prompt_tokens": 64,
            "max_tokens": 16,
            "warmup": 1,
            "iterations": 2,
            "concurrency": [1],
            "prompt_set": {"name": "s", "dataset": ds},
            "enable_thinking": False,
        }
    )
    assert wl.prompt_set is not None and wl.enable_thinking is False


def _spec(tmp_path: Path, engine: str, **kw: object) -> RunSpec:
    f = tmp_path / "p.jsonl"
    f.write_text(GOOD, encoding="utf-8")
    hw = Hardware.model_validate(
        {
            "hwClass": "DISCRETE_GPU",
            "gpuName": "g",
            "gpuCount": 1,
            "vramGb": 24,
            "gpus": [{"name": "g", "vramGb": 24}],
            "cpu": "c",
            "ramGb": 64,
            "os": "linux",
        }
    )
    return RunSpec.model_validate(
        {
            "engine": engine,
            "base_url": "http://127.0.0.1:1",
            "hf_id": "a/b",
            "served_model": "m",
            "quantization": "q",
            "hardware": hw,
            "prompt_tokens": 8,
            "max_tokens": 4,
            "warmup": 1,
            "iterations": 2,
            "prompt_set": read_prompt_set(f, "p", None, "x"),
            **kw,
        }
    )


def test_each_category_is_its_own_windows_and_the_body_says_template_and_details(
    tmp_path: Path,
) -> None:
    spec = _spec(tmp_path, "sglang", spec_method="mtp", spec_num_tokens=2, enable_thinking=True)
    assert iteration_slots(spec) == [
        ("code", True),
        ("code", False),
        ("code", False),
        ("prose", True),
        ("prose", False),
        ("prose", False),
    ]
    msgs = [{"role": "user", "content": "hi"}]
    body = request_body(spec, "", msgs)
    assert body["messages"] == msgs
    assert body["chat_template_kwargs"] == {"enable_thinking": True}
    assert body["return_spec_tokens_details"] is True
    # vLLM 0.33.0 has no request field for it; a baseline has nothing to detail
    assert "return_spec_tokens_details" not in request_body(
        _spec(tmp_path, "vllm", spec_method="mtp", spec_num_tokens=2), "", msgs
    )
    assert "return_spec_tokens_details" not in request_body(_spec(tmp_path, "sglang"), "", msgs)
    assert "chat_template_kwargs" not in request_body(_spec(tmp_path, "sglang"), "", msgs)
    rec = sampling_record(spec)
    assert (rec.temperature, rec.max_tokens, rec.ignore_eos, rec.top_p) == (0.0, 4, True, None)
