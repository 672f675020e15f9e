"""CLI command: tiny-model (a random Qwen3 target, a partial draft and the seed methods' chain
models for engine tests)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""

    @app.command("tiny-model")
    def tiny_model(
        out: Annotated[
            Path,
            typer.Argument(help="folder to write target/, draft/, chain/, dflash/ and mtp/ into"),
        ],
        seed: Annotated[int, typer.Option("--seed", min=0, help="random seed")] = 0,
        draft_noise: Annotated[
            float | None,
            typer.Option("--draft-noise", min=0.0, help="std of the noise added to the draft"),
        ] = None,
        as_json: Annotated[
            bool, typer.Option("--json", help="print what was made as JSON")
        ] = False,
    ) -> None:
        """Write a deterministic tiny Qwen3 target (~1 MB, BPE tokenizer, ChatML template), a
        draft of the same vocabulary that agrees with it only partly, and models for the seed's
        methods whose acceptance is known in advance: chain/ (Qwen3, next token fixed by the
        current one), dflash/ (a DFlash draft for it: acceptance 1/k) and mtp/ (Qwen3-Next with
        one MTP layer: acceptance 1.0). Nothing is downloaded."""
        from bench.tinymodel import TinyModelSpec, make_tiny_models

        spec = TinyModelSpec() if draft_noise is None else TinyModelSpec(draft_noise=draft_noise)
        made = make_tiny_models(out, seed=seed, spec=spec)
        if as_json:
            typer.echo(made.model_dump_json(indent=2))
            return
        for model in (made.target, made.draft, made.chain, made.dflash, made.mtp):
            typer.echo(
                f"{model.path}  {model.parameters} parameters, {model.size_bytes} bytes, "
                f"weights sha256 {model.sha256['model.safetensors'][:12]}"
            )
