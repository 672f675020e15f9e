"""Errors the CLI turns into exit codes and one-line messages (never a traceback)."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import ValidationError


class SpecbenchError(Exception):
    """Base of every error the CLI reports as one line."""

    exit_code = 1


class InputError(SpecbenchError):
    """Bad input from the user: a file, a flag, a value. Exit code 2."""

    exit_code = 2

    def __init__(self, where: str, reason: str) -> None:
        self.where = where
        self.reason = reason
        super().__init__(f"{where}: {reason}")


class RunError(SpecbenchError):
    """The run could not proceed (server never ready, container died, ...). Exit code 1."""

    exit_code = 1


class ServerError(SpecbenchError):
    """The server answered, but not usably, before anything was measured: HTTP 429/5xx after
    the retries its ``Retry-After`` allowed, a model list or calibration stream that is not
    one, a stall. Not the user's input (exit 2), not an invalid run (exit 1). Exit code 3."""

    exit_code = 3


def describe_validation_error(
    source: str, err: ValidationError, names: Mapping[str, str] | None = None
) -> InputError:
    """Turn a pydantic ValidationError into an InputError naming the first field at fault;
    ``names`` maps a model field to what the user typed for it (a CLI option)."""
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first["loc"]) or "<root>"
    more = len(err.errors()) - 1
    suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
    msg = str(first["msg"]).removeprefix("Value error, ")
    top = str(first["loc"][0]) if first["loc"] else ""
    if names and top in names:
        return InputError(names[top], f"{msg}{suffix}")
    return InputError(f"{source}: {loc}", f"{first['msg']}{suffix}")


def describe_yaml_error(err: Exception) -> str:
    """One line for a PyYAML error: the problem and where (PyYAML's own text spans lines)."""
    problem = getattr(err, "problem", None)
    if not problem:
        return " ".join(str(err).split())
    context = getattr(err, "context", None)
    mark = getattr(err, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"{context + ': ' if context else ''}{problem}{where}"
