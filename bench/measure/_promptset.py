"""Prompt sets: real-text prompts with a category each, read from a JSONL file.

One JSON object a line: ``{"category": "code", "messages": [{"role": "user", "content": ...}]}``
or ``{"category": "code", "prompt": "..."}`` (a single user message). Blank lines are skipped.
The file is read through the reading layer (bounds, UTF-8); a bad line is exit 2 naming the
file and the line. The experiment pins the file's sha256: a file that changed is refused.

A dataset prompt set (``workload.prompt_set.dataset``, a pinned Hugging Face dataset revision) is
fetched on the GPU host by the Ansible models stage into ``<model cache>/datasets/<name>/<file>``
and read from there, checked against the sha256 of the experiment or its pins lock.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, model_validator

from bench.core import (
    InputError,
    StrictModel,
    describe_validation_error,
    json_lines,
    parse_json,
    read_text,
)
from bench.schema import PromptSetRecord
from bench.schema._experiment import UNRESOLVED, DatasetPin, PromptSetSpec

#: a prompt set is a small file of text prompts; anything bigger is a mistake
MAX_PROMPT_SET_BYTES = 16 * 1024 * 1024
CATEGORY_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,31}$"


class Message(StrictModel):
    role: Literal["system", "user", "assistant"]
    content: str = Field(min_length=1)


class PromptItem(StrictModel):
    """One prompt of a prompt set, as the request's ``messages``."""

    category: str = Field(pattern=CATEGORY_PATTERN)
    messages: list[Message] | None = Field(default=None, min_length=1)
    prompt: str | None = Field(default=None, min_length=1)
    id: str | None = None

    @model_validator(mode="after")
    def _one_text(self) -> PromptItem:
        if (self.messages is None) == (self.prompt is None):
            raise ValueError("give exactly one of 'messages' and 'prompt'")
        if self.messages is not None and self.messages[-1].role != "user":
            raise ValueError("the last message must be the user's")
        return self

    def chat_messages(self) -> list[dict[str, str]]:
        if self.messages is not None:
            return [m.model_dump() for m in self.messages]
        return [{"role": "user", "content": self.prompt or ""}]

    def text(self) -> str:
        """Every message's content, one per line: what the prompt hash covers."""
        return "\n".join(m["content"] for m in self.chat_messages())


class PromptSet(StrictModel):
    """A prompt set read from disk: its items in file order and the file's sha256."""

    name: str
    source: str
    sha256: str
    items: list[PromptItem] = Field(min_length=1)

    def categories(self) -> list[str]:
        """Categories in the order they first appear in the file."""
        return list(dict.fromkeys(i.category for i in self.items))

    def of(self, category: str) -> list[PromptItem]:
        return [i for i in self.items if i.category == category]

    def record(self) -> PromptSetRecord:
        return PromptSetRecord(
            name=self.name,
            sha256=self.sha256,
            source=self.source,
            prompts={c: len(self.of(c)) for c in self.categories()},
        )


def parse_prompt_set(text: str, source: str, name: str) -> PromptSet:
    """The prompt set in ``text`` (JSONL); InputError naming ``source:line`` at a bad line.
    Records end at ``\\n`` only (the JSON Lines rule): U+2028, U+0085 and the other line breaks
    Python's splitlines knows are legal inside a JSON string."""
    items: list[PromptItem] = []
    for n, line in json_lines(text):
        where = f"{source}:{n}"
        data = parse_json(line, where)
        if not isinstance(data, dict):
            raise InputError(where, "each line must be a JSON object")
        try:
            items.append(PromptItem.model_validate(data))
        except ValidationError as err:
            raise describe_validation_error(where, err) from None
    if not items:
        raise InputError(source, "the prompt set holds no prompt")
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return PromptSet(name=name, source=source, sha256=digest, items=items)


def read_prompt_set(path: Path, name: str, sha256: str | None, field: str) -> PromptSet:
    """Read and check a local prompt set; a sha256 other than the pinned one is exit 2 naming
    ``field`` (the experiment's ``workload.prompt_set.sha256``)."""
    text = read_text(path, what="prompt set", max_bytes=MAX_PROMPT_SET_BYTES)
    ps = parse_prompt_set(text, str(path), name)
    if sha256 is not None and ps.sha256 != sha256:
        raise InputError(
            field,
            f"{path} has sha256 {ps.sha256}, the experiment pins {sha256} (the file changed: "
            "check it, then pin the new sha256)",
        )
    return ps


def dataset_file(name: str, d: DatasetPin, model_cache: Path) -> Path:
    """Where the models stage puts a dataset prompt set's file (the models role's
    ``models_dir/datasets/<name>/<file>``)."""
    return model_cache / "datasets" / name / d.file


def read_dataset_prompt_set(name: str, d: DatasetPin, model_cache: Path) -> PromptSet:
    """A dataset prompt set as the models stage fetched it into ``model_cache``, checked against
    its pinned sha256 (the experiment's, or the pins lock's once applied)."""
    path = dataset_file(name, d, model_cache)
    field = "workload.prompt_set.dataset"
    # d.file is a path inside the dataset: DatasetPin refuses any other (bench.schema)
    if not path.is_file():
        raise InputError(
            field,
            f"{d.hf_id} {d.file} is not at {path}: the models stage (`make provision`) fetches "
            "it there; or point --model-cache at the folder that holds datasets/"
            f"{name}/{d.file}",
        )
    if d.sha256 == UNRESOLVED:
        raise InputError(
            f"{field}.sha256",
            f"unresolved in the experiment and in its pins lock, so {path} cannot be checked: "
            "run the models stage (`make provision`), which fetches the file and records its "
            "commit and sha256 in the lock",
        )
    ps = read_prompt_set(path, name, None, f"{field}.sha256")
    if ps.sha256 != d.sha256:
        raise InputError(
            f"{field}.sha256",
            f"{path} has sha256 {ps.sha256}, the pin is {d.sha256} ({d.hf_id}@{d.revision} "
            f"{d.file}): the file is not the one pinned; run the models stage again to fetch it",
        )
    return ps.model_copy(update={"source": f"{d.hf_id}@{d.revision} {d.file}"})


def experiment_prompt_set(
    spec: PromptSetSpec | None, model_cache: Path | None = None
) -> PromptSet | None:
    """The experiment's prompt set, read and checked against its pin (None: synthetic). A
    dataset prompt set is read from where the models stage fetched it under ``model_cache``
    (the matrix's ``--model-cache``)."""
    if spec is None:
        return None
    if spec.dataset is not None:
        if model_cache is None:
            raise InputError(
                "workload.prompt_set.dataset",
                "a dataset prompt set is read from the models stage's download: give the "
                "folder it fetched into (--model-cache)",
            )
        return read_dataset_prompt_set(spec.name, spec.dataset, model_cache)
    return read_prompt_set(
        Path(spec.path or ""), spec.name, spec.sha256, "workload.prompt_set.sha256"
    )
