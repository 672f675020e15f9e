"""Prompt sets: real-text prompts with a category each, read from a JSONL file.

One JSON object a line: ``{"category": "code", "messages": [{"role": "user", "content": ...}]}``
or ``{"category": "code", "prompt": "..."}`` (a single user message). Blank lines are skipped.
The file is read through the reading layer (bounds, UTF-8); a bad line is exit 2 naming the
file and the line. The experiment pins the file's sha256: a file that changed is refused.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, model_validator

from bench.core import InputError, StrictModel, describe_validation_error, parse_json, read_text
from bench.schema import PromptSetRecord
from bench.schema._experiment import PromptSetSpec

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
    """The prompt set in ``text`` (JSONL); InputError naming ``source:line`` at a bad line."""
    items: list[PromptItem] = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
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


def experiment_prompt_set(spec: PromptSetSpec | None) -> PromptSet | None:
    """The experiment's prompt set, read and checked against its pin (None: synthetic)."""
    if spec is None:
        return None
    if spec.path is None:
        raise InputError(
            "workload.prompt_set.dataset",
            "a dataset prompt set is fetched on the GPU host by the models stage, which does "
            "not fetch datasets yet: give a local 'path' (with its sha256) for now",
        )
    return read_prompt_set(Path(spec.path), spec.name, spec.sha256, "workload.prompt_set.sha256")
