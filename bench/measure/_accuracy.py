"""The accuracy gate's task (issue 48): questions with known answers, asked of a configuration's
server after its timed levels, through the same HTTP client, at temperature 0.

A task is a JSONL file pinned by sha256 like a prompt set (``workload.accuracy``): a local
file, a dataset's file or a file pinned by URL (``source``: GSM8K's test split from GitHub),
the last two fetched by the models stage into ``<model cache>/datasets/<name>/``. One object a
line, ``{"id", "prompt" or "messages", "answer"}``, or GSM8K's own ``{"question", "answer"}``
whose answer ends in ``#### N``. Two scorers:

- ``prefix``: the output, stripped, begins with the answer (the constructed tasks: the tiny
  chain model's and the emulator's greedy continuations are known exactly);
- ``gsm8k``: the expected number is the one after ``#### `` (commas dropped); the extracted one
  is the output's own ``#### N`` if it has one (lm-eval's strict-match), else its last number
  (lm-eval's flexible-extract). The rules are lm-eval's gsm8k task's (``#### (\\-?[0-9\\.\\,]+)``
  and ``(-?[$0-9.,]{2,})|(-?[0-9]+)``); lm-eval itself is not used: it brings torch and the
  datasets library into the runner's environment and sends its own requests, and the gate must
  ask through the client the measurement uses.

Answers are asked one at a time (concurrency 1): a greedy answer of a batch may differ from the
same answer alone where numerics of the batch shape move it. The requests do not set
``ignore_eos``: an answer ends where the model ends it, within ``max_tokens``.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, model_validator

from bench.core import (
    InputError,
    StrictModel,
    describe_validation_error,
    json_lines,
    parse_json,
    read_text,
)
from bench.measure._client import RawResponse, chat_body, request
from bench.measure._probes import plain_answer
from bench.measure._promptset import MAX_PROMPT_SET_BYTES, Message, dataset_file
from bench.schema import AccuracyItem, AccuracyRecord
from bench.schema._experiment import UNRESOLVED, AccuracyTaskSpec

#: lm-eval's gsm8k task (lm_eval/tasks/gsm8k/gsm8k.yaml): strict-match, flexible-extract
GSM8K_STRICT = re.compile(r"#### (\-?[0-9\.\,]+)")
GSM8K_FLEXIBLE = re.compile(r"(-?[$0-9.,]{2,})|(-?[0-9]+)")


class TaskItem(StrictModel):
    """One question: our own shape (``prompt``/``messages`` + ``answer``) or GSM8K's."""

    id: str | None = None
    prompt: str | None = Field(default=None, min_length=1)
    messages: list[Message] | None = Field(default=None, min_length=1)
    question: str | None = Field(default=None, min_length=1)
    answer: str = Field(min_length=1)

    @model_validator(mode="after")
    def _one_text(self) -> TaskItem:
        given = [x for x in (self.prompt, self.messages, self.question) if x is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of 'prompt', 'messages' and 'question'")
        return self

    def chat_messages(self) -> list[dict[str, str]]:
        if self.messages is not None:
            return [m.model_dump() for m in self.messages]
        return [{"role": "user", "content": self.prompt or self.question or ""}]


class AccuracyTask(StrictModel):
    """A task read from disk and checked against its pin."""

    spec: AccuracyTaskSpec
    source: str
    sha256: str
    items: list[TaskItem] = Field(min_length=1)

    def item_id(self, n: int) -> str:
        return self.items[n].id or f"q{n + 1}"

    def expected(self, n: int) -> str:
        return expected_answer(self.items[n].answer, self.spec.scorer)


def expected_answer(answer: str, scorer: str) -> str:
    """The answer a correct output must give: GSM8K's number after ``#### ``, else as written."""
    if scorer != "gsm8k":
        return answer.strip()
    m = GSM8K_STRICT.search(answer)
    return _number(m.group(1)) if m else answer.strip()


def _number(text: str) -> str:
    """A number as GSM8K compares it: commas and a trailing period dropped, '$' dropped."""
    return text.replace(",", "").replace("$", "").rstrip(".")


def extract(output: str, scorer: str) -> str | None:
    """What the output answered: its start (prefix), or its GSM8K number."""
    if scorer != "gsm8k":
        return output.strip() or None
    strict = GSM8K_STRICT.findall(output)
    if strict:
        return _number(strict[-1])
    found = [a or b for a, b in GSM8K_FLEXIBLE.findall(output)]
    return _number(found[-1]) if found else None


def correct(expected: str, got: str | None, scorer: str) -> bool:
    if got is None:
        return False
    if scorer == "gsm8k":
        return got == expected
    return got.startswith(expected)


def parse_task(text: str, source: str, spec: AccuracyTaskSpec) -> AccuracyTask:
    """The task in ``text`` (JSONL), its first ``spec.limit`` questions; exit 2 naming the line.
    Records end at ``\\n`` only, as a prompt set's (U+2028 inside a string stays in it); the
    sha256 is of the whole text, so the subset is defined by the pinned bytes."""
    items: list[TaskItem] = []
    for n, line in json_lines(text):
        where = f"{source}:{n}"
        data = parse_json(line, where)
        if not isinstance(data, dict):
            raise InputError(where, "each line must be a JSON object")
        try:
            items.append(TaskItem.model_validate(data))
        except ValidationError as err:
            raise describe_validation_error(where, err) from None
        if spec.limit is not None and len(items) >= spec.limit:
            break
    if not items:
        raise InputError(source, "the accuracy task holds no question")
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return AccuracyTask(spec=spec, source=source, sha256=digest, items=items)


def accuracy_task_file(spec: AccuracyTaskSpec, model_cache: Path) -> Path:
    """Where the models stage puts a fetched task (a dataset's file, or a file pinned by URL):
    ``<model_cache>/datasets/<name>/<file>``, as for a dataset prompt set."""
    if spec.source is not None:
        return model_cache / "datasets" / spec.name / spec.source.file
    if spec.dataset is not None:
        return dataset_file(spec.name, spec.dataset, model_cache)
    raise ValueError("a local accuracy task is not fetched")


def _fetched_pin(spec: AccuracyTaskSpec) -> tuple[str, str, str]:
    """A fetched task's field, what it is (for messages and the record), and pinned sha256."""
    if spec.source is not None:
        return "workload.accuracy.source", spec.source.url, spec.source.sha256
    d = spec.dataset
    assert d is not None  # AccuracyTaskSpec: exactly one source
    return "workload.accuracy.dataset", f"{d.hf_id}@{d.revision} {d.file}", d.sha256


def read_accuracy_task(
    spec: AccuracyTaskSpec | None, model_cache: Path | None, *, missing_ok: bool = False
) -> AccuracyTask | None:
    """The experiment's accuracy task, read and checked against its pin (None: none). A
    fetched one (``dataset`` or ``source``) is read from where the models stage put it under
    ``model_cache``; ``missing_ok`` (an emulated run, which no models stage serves): None
    when it is not there."""
    if spec is None:
        return None
    if not spec.fetched:
        path = Path(spec.path or "")
        if not path.is_file():
            raise InputError("workload.accuracy", f"the accuracy task {path} is not there")
        return _checked(path, str(path), spec, spec.sha256 or "", "workload.accuracy.sha256")
    field, what, pinned = _fetched_pin(spec)
    if model_cache is None:
        raise InputError(field, "a fetched accuracy task is read from --model-cache")
    path = accuracy_task_file(spec, model_cache)
    if not path.is_file():
        if missing_ok:
            return None
        raise InputError(
            field,
            f"{what} is not at {path}: the models stage (`make provision`) fetches it there; "
            f"or point --model-cache at the folder that holds datasets/{spec.name}/{path.name}",
        )
    if pinned == UNRESOLVED:
        raise InputError(
            f"{field}.sha256",
            f"unresolved in the experiment and in its pins lock, so {path} cannot be checked: "
            "run the models stage (`make provision`), which fetches the file and records its "
            "sha256 in the lock",
        )
    return _checked(path, what, spec, pinned, f"{field}.sha256")


def _checked(
    path: Path, source: str, spec: AccuracyTaskSpec, pinned: str, where: str
) -> AccuracyTask:
    """The task in ``path``, refused (exit 2 naming ``where``) when it is not the pinned file."""
    text = read_text(path, what="accuracy task", max_bytes=MAX_PROMPT_SET_BYTES)
    task = parse_task(text, source, spec)
    if task.sha256 != pinned:
        fix = (
            "run the models stage again to fetch it"
            if spec.fetched
            else "check it, then pin the new sha256"
        )
        raise InputError(
            where,
            f"{path} has sha256 {task.sha256}, the pin is {pinned}: the file is not the one "
            f"pinned ({source}); {fix}",
        )
    return task


def _body(served_model: str, messages: list[dict[str, str]], max_tokens: int) -> dict[str, Any]:
    body = chat_body(served_model, "", max_tokens, 0.0)
    del body["stream_options"]  # a plain request: vLLM answers 400 to stream_options on one
    body.pop("ignore_eos")  # an answer ends where the model ends it
    return body | {"messages": messages, "stream": False}


def _scored(task: AccuracyTask, n: int, raw: RawResponse) -> AccuracyItem:
    scorer, expected = task.spec.scorer, task.expected(n)
    text, count, error = plain_answer(raw)
    if text is None:
        return AccuracyItem(id=task.item_id(n), expected=expected, correct=False, error=error)
    got = extract(text, scorer)
    shown = got if scorer == "gsm8k" or got is None else got[: len(expected) + 40]
    return AccuracyItem(
        id=task.item_id(n),
        expected=expected,
        got=shown,
        correct=correct(expected, got, scorer),
        completion_tokens=count if isinstance(count, int) and count >= 0 else None,
        output_sha256=hashlib.sha256(text.encode()).hexdigest(),
    )


async def ask_task(
    base_url: str, served_model: str, task: AccuracyTask, timeout_s: float
) -> AccuracyRecord:
    """Every question of ``task``, one at a time; a failed request scores as wrong, with why."""
    items = []
    for n, item in enumerate(task.items):
        body = _body(served_model, item.chat_messages(), task.spec.max_tokens)
        raw = await request(base_url, "POST", "/v1/chat/completions", body, timeout_s)
        items.append(_scored(task, n, raw))
    return AccuracyRecord(
        task=task.spec.name,
        sha256=task.sha256,
        source=task.source,
        scorer=task.spec.scorer,
        max_tokens=task.spec.max_tokens,
        concurrency=1,
        items=items,
    )


def answer_task(
    base_url: str, served_model: str, task: AccuracyTask, timeout_s: float
) -> AccuracyRecord:
    """``ask_task`` from synchronous code (the matrix, after a configuration's levels)."""
    return asyncio.run(ask_task(base_url, served_model, task, timeout_s))
