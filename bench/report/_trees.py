"""The finding of an experiment that runs one engine and method on two trees (images, or a
local package as released and patched): the acceptance each tree reached and its verdict, for
the first lines of the report. The seed's SGLang story is such a pair: the stock tree's MTP
draft inherited GPTQ and accepted nothing, the patched tree's accepted the chain."""

from __future__ import annotations

from bench.core import StrictModel
from bench.report._model import RunSet, RunView


class TreeSide(StrictModel):
    run: RunView
    image: str = ""
    modified: tuple[str, ...] | None = None
    """files of the engine package that differ from its wheel (None: not recorded)"""


class TreeContrast(StrictModel):
    engine: str
    method: str
    concurrency: int
    sides: tuple[TreeSide, ...]


def _side(rs: RunSet, run: RunView) -> TreeSide:
    info = rs.config_info(run.config)
    inst = run.launch.engine_install if run.launch is not None else None
    return TreeSide(
        run=run,
        image=(info.image if info and info.image else "") or "",
        modified=tuple(inst.modified) if inst is not None else None,
    )


def tree_contrasts(rs: RunSet) -> list[TreeContrast]:
    """Every (engine, method, speculative depth, target) run on two or more images: each
    tree's run, valid or not, at the lowest concurrency every one of them measured."""
    groups: dict[tuple[str, str, int | None, str], list[RunView]] = {}
    images: dict[str, str] = {}
    for r in rs.runs:
        info = rs.config_info(r.config)
        if r.attempt is not None or r.method == "NONE" or info is None or not info.image:
            continue
        images[r.config] = info.image
        groups.setdefault((r.engine, r.method, r.spec_tokens, info.target or ""), []).append(r)
    out: list[TreeContrast] = []
    for (engine, method, _, _), runs in groups.items():
        configs = {r.config for r in runs}
        if len({images[c] for c in configs}) < 2:
            continue
        levels = sorted({r.concurrency for r in runs})
        common = [c for c in levels if {r.config for r in runs if r.concurrency == c} == configs]
        level = (common or levels)[0]
        sides = tuple(_side(rs, r) for r in runs if r.concurrency == level)
        out.append(TreeContrast(engine=engine, method=method, concurrency=level, sides=sides))
    return out
