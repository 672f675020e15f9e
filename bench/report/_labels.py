"""Names the report gives a run: engine + method, and the configuration where that pair alone
would not tell two configurations apart (issue 36: "vLLM + draft model" named both the
self-draft and the partial-draft run everywhere).

A configuration is named by its experiment name; the setting that tells it from its siblings
(speculative tokens, draft model, server flags) is stated once, in the report's test setup."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from bench.report._model import RunSet
from bench.report._text import engine_label, method_label


class Labelled(Protocol):
    @property
    def engine(self) -> str: ...

    @property
    def method(self) -> str: ...

    @property
    def config(self) -> str: ...


def named_configs(rs: RunSet) -> set[str]:
    """Configurations whose label must name them: where another configuration of the same
    engine and method also entered the comparisons (a valid run), or where this one has no
    valid run and shares its engine and method with any other (a failed '-stock' or eager
    run beside the valid one keeps the plain label for the valid one)."""
    current = [r for r in rs.runs if r.attempt is None] or list(rs.runs)
    configs: dict[tuple[str, str], set[str]] = {}
    valid: dict[tuple[str, str], set[str]] = {}
    for r in current:
        configs.setdefault((r.engine, r.method), set()).add(r.config)
        if r.valid:
            valid.setdefault((r.engine, r.method), set()).add(r.config)
    named: set[str] = set()
    for pair, names in configs.items():
        ok = valid.get(pair, set())
        if len(ok) > 1:
            named |= names
        elif len(names) > 1:
            named |= names - ok
    return named


def plain_label(engine: str, method: str) -> str:
    return f"{engine_label(engine)} + {method_label(method)}"


def run_label(obj: Labelled, named: set[str]) -> str:
    """'vLLM + DFlash', or 'vLLM + draft model (self-draft)' where it must be named."""
    base = plain_label(obj.engine, obj.method)
    return f"{base} ({obj.config})" if obj.config in named else base


def run_place(obj: Labelled, named: set[str]) -> str:
    """The engine, and the configuration where it must be named: where a sentence already
    names the method ('MTP reached 92.78 tok/s on vLLM')."""
    base = engine_label(obj.engine)
    return f"{base} ({obj.config})" if obj.config in named else base


def differing_settings(rs: RunSet, config: str) -> list[str]:
    """What sets ``config`` apart from the other configurations of its engine and method
    ('the draft model', 'the speculative tokens', 'flags --x 1'), or nothing when it shares
    its engine and method with none, or the lock does not say."""
    me = rs.config_info(config)
    if me is None:
        return []
    siblings = [
        c for c in rs.configs if c.name != config and (c.engine, c.method) == (me.engine, me.method)
    ]
    if not siblings:
        return []
    out: list[str] = []
    if any(c.spec_tokens != me.spec_tokens for c in siblings):
        out.append("the speculative tokens")
    if any(c.draft_model != me.draft_model for c in siblings):
        out.append("the draft model")
    flags = _only_in(me.flags, (c.flags for c in siblings))
    if flags and not out:
        out.append("flags " + " ".join(flags))
    return out


def siblings(rs: RunSet, config: str) -> list[str]:
    """The other configurations of ``config``'s engine and method that ran."""
    me = next((r for r in rs.runs if r.config == config), None)
    if me is None:
        return []
    return sorted(
        {r.config for r in rs.runs if (r.engine, r.method) == (me.engine, me.method)} - {config}
    )


def _only_in(flags: tuple[str, ...], others: Iterable[tuple[str, ...]]) -> list[str]:
    """``flags`` entries (an option with its value) that some other flag list lacks."""
    pairs = _options(flags)
    rest = [set(_options(o)) for o in others]
    return [p for p in pairs if any(p not in r for r in rest)]


def _options(flags: tuple[str, ...]) -> list[str]:
    """'--opt value' joined, so a changed value counts as a changed option."""
    out: list[str] = []
    for f in flags:
        if f.startswith("-") or not out:
            out.append(f)
        else:
            out[-1] = f"{out[-1]} {f}"
    return out
