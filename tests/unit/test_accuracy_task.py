"""The accuracy task (issue 48): its two scorers with answers worked out by hand (GSM8K's by
lm-eval's rules), its pinned file refused when it changed, and the demo's constructed task
whose answers are the emulator's own greedy output."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from bench.core import InputError
from bench.demo import DEMO_ACCURACY_TASK
from bench.emulator.logprobs import emission
from bench.measure import read_accuracy_task
from bench.measure._accuracy import correct, expected_answer, extract, parse_task
from bench.schema._experiment import AccuracyTaskSpec

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("output", "got"),
    [
        ("She sells 16 - 3 - 4 = 9 eggs, so 9 * 2 = 18 dollars.\n#### 18", "18"),
        ("#### 1,234.", "1234"),  # commas and a final period dropped
        ("The answer is $1,080.", "1080"),  # flexible-extract: the last number, '$' dropped
        ("3 apples and then 5 more: 8", "8"),
        ("no number at all", None),
        ("#### -7 but later 12", "-7"),  # strict-match wins over the last number
    ],
)
def test_gsm8k_extraction_follows_lm_evals_rules(output: str, got: str | None) -> None:
    assert extract(output, "gsm8k") == got


def test_gsm8k_expected_answer_is_the_number_after_the_marks() -> None:
    assert expected_answer("Janet has 16 eggs...\n#### 18", "gsm8k") == "18"
    assert expected_answer("... #### 1,000", "gsm8k") == "1000"
    assert correct("18", "18", "gsm8k") and not correct("18", "18.5", "gsm8k")
    assert correct("w0 w1", "w0 w1 w2", "prefix") and not correct("w0 w1", "w1", "prefix")
    assert not correct("x", None, "prefix")


def spec(path: Path, sha: str, **kw: object) -> AccuracyTaskSpec:
    return AccuracyTaskSpec.model_validate(
        {"name": "t", "path": str(path), "sha256": sha, "scorer": "gsm8k", "max_tokens": 64, **kw}
    )


def test_a_pinned_task_is_read_to_its_limit_and_refused_when_changed(tmp_path: Path) -> None:
    f = tmp_path / "gsm.jsonl"
    lines = [{"question": f"What is {i} + {i}?", "answer": f"{i} + {i} = {2 * i}\n#### {2 * i}"}
             for i in range(1, 6)]  # fmt: skip
    f.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    sha = hashlib.sha256(f.read_bytes()).hexdigest()
    task = read_accuracy_task(spec(f, sha, limit=3), None)
    assert task is not None and task.sha256 == sha and len(task.items) == 3
    assert [task.expected(n) for n in range(3)] == ["2", "4", "6"]
    assert task.items[0].chat_messages() == [{"role": "user", "content": "What is 1 + 1?"}]
    with pytest.raises(InputError) as err:
        read_accuracy_task(spec(f, "0" * 64), None)
    assert err.value.where == "workload.accuracy.sha256"
    with pytest.raises(InputError, match="exactly one of 'prompt', 'messages' and 'question'"):
        parse_task('{"answer": "1"}\n', "x.jsonl", spec(f, sha))


def test_the_demos_task_is_the_emulators_own_greedy_continuation() -> None:
    answer = "".join(emission(i).token for i in range(8)).strip()
    lines = [json.loads(x) for x in DEMO_ACCURACY_TASK.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == 12 and {x["answer"] for x in lines} == {answer}
    assert len({x["prompt"] for x in lines}) == 12
