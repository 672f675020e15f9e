"""CLI command: tiny-model (a random Qwen3 target, a partial draft and the seed methods' chain
models for engine tests; on request the MTP chain targets GPTQ-packed)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from bench.commands._params import number
from bench.core import DRAFT_NOISE, check_output_dir


class Quantization(StrEnum):
    """What ``--quantization`` adds to the models written."""

    NONE = "none"
    #: mtp-gptq/: the MTP chain target, GPTQ 4-bit (AutoGPTQ/GPTQModel format), MTP head BF16;
    #: mtp35-gptq/ and mtp35-gptq-mtprule/: mtp35/ so, without / with a -:.*mtp.* rule;
    #: mtp35vl-gptq/: mtp35-gptq/ in the Qwen3_5ForConditionalGeneration layout
    GPTQ_4BIT = "gptq-4bit"


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""

    @app.command("tiny-model")
    def tiny_model(
        out: Annotated[
            Path,
            typer.Argument(
                help="folder to write target/, draft/, chain/, dflash/, mtp/ and mtp35/ into "
                "(and mtp-gptq/, mtp35-gptq/, mtp35-gptq-mtprule/ and mtp35vl-gptq/ with "
                "--quantization gptq-4bit)"
            ),
        ],
        seed: Annotated[int, typer.Option("--seed", min=0, help="random seed")] = 0,
        draft_noise: Annotated[
            float | None,
            typer.Option(
                "--draft-noise",
                help="std of the noise added to the draft",
                parser=number(DRAFT_NOISE),
            ),
        ] = None,
        quantization: Annotated[
            Quantization,
            typer.Option(
                "--quantization",
                help="gptq-4bit: also write mtp-gptq/, the MTP chain target with every linear "
                "layer of its decoder blocks GPTQ-packed (4 bits, symmetric, desc_act false) "
                "and its mtp.* head BF16, same answers as mtp/; and mtp35-gptq/ (mtp35/, the "
                "dense Qwen3.5 chain target, so: in_proj_a/b BF16, no rule about mtp.*, the "
                "seed's shape), mtp35-gptq-mtprule/ (the same tensors with a -:.*mtp.* rule) "
                "and mtp35vl-gptq/ (mtp35-gptq/ in the Qwen3_5ForConditionalGeneration layout "
                "vLLM loads)",
            ),
        ] = Quantization.NONE,
        group_size: Annotated[
            int,
            typer.Option("--gptq-group-size", min=1, help="GPTQ group size (the seed's: 32)"),
        ] = 32,
        gptq_experts: Annotated[
            bool,
            typer.Option(
                "--gptq-experts",
                help="pack the routed MoE experts too (kept BF16 by default: vLLM's CPU build "
                "has no GPTQ MoE kernel without AMX, docs/gptq-cpu.md)",
            ),
        ] = False,
        as_json: Annotated[
            bool, typer.Option("--json", help="print what was made as JSON")
        ] = False,
    ) -> None:
        """Write a deterministic tiny Qwen3 target (~1 MB, BPE tokenizer, ChatML template), a
        draft of the same vocabulary that agrees with it only partly, and models for the seed's
        methods whose acceptance is known in advance: chain/ (Qwen3, next token fixed by the
        current one), dflash/ (a DFlash draft for it: acceptance 1/k), mtp/ (Qwen3-Next with
        one MTP layer: acceptance 1.0) and mtp35/ (the same chain as a dense Qwen3.5 text model,
        Qwen3_5ForCausalLM); with --quantization gptq-4bit also mtp-gptq/ (mtp/ as a GPTQ 4-bit
        checkpoint with a BF16 MTP head, the seed checkpoint's shape), mtp35-gptq/ (mtp35/ so,
        no rule about mtp.*), mtp35-gptq-mtprule/ (with a -:.*mtp.* rule) and mtp35vl-gptq/
        (mtp35-gptq/'s tensors as Qwen3_5ForConditionalGeneration, the layout vLLM loads).
        Nothing is downloaded."""
        from bench.tinymodel import GptqOptions, TinyModelSpec, make_tiny_models

        check_output_dir(out, "OUT")
        spec = TinyModelSpec() if draft_noise is None else TinyModelSpec(draft_noise=draft_noise)
        gptq = (
            GptqOptions(group_size=group_size, quantize_experts=gptq_experts)
            if quantization is Quantization.GPTQ_4BIT
            else None
        )
        made = make_tiny_models(out, seed=seed, spec=spec, gptq=gptq)
        if as_json:
            typer.echo(made.model_dump_json(indent=2))
            return
        for model in (
            made.target,
            made.draft,
            made.chain,
            made.dflash,
            made.mtp,
            made.mtp35,
            made.mtp_gptq,
            made.mtp35_gptq,
            made.mtp35_gptq_mtprule,
            made.mtp35vl_gptq,
        ):
            if model is None:
                continue
            typer.echo(
                f"{model.path}  {model.parameters} parameters, {model.size_bytes} bytes, "
                f"weights sha256 {model.sha256['model.safetensors'][:12]}"
            )
