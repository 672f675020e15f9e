"""CLI commands: ``run`` (measure one endpoint; the seed's ``lmx speed-test run`` line works flag
for flag), ``validate`` (offline dry-run validator) and ``schema payload``. Parsing and printing
only: the work is in bench.measure and bench.schema."""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Final

import typer
from pydantic import ValidationError

from bench.commands._params import number
from bench.core import (
    MAX_CONCURRENCY,
    MAX_ITERATIONS,
    MAX_TOKENS,
    MEMORY_FRACTION,
    NON_NEGATIVE,
    TIMEOUT_S,
    InputError,
    check_output_file,
    describe_validation_error,
    ensure_writable_file,
    read_json_model,
)
from bench.machine import SamplerStart, open_sampler
from bench.measure import (
    MAX_PROBES,
    ProgressBar,
    RunSpec,
    find_cached_tokenizer,
    measure,
    read_prompt_set,
    split_base_url,
)
from bench.schema import Hardware, Payload, check_payload_file, payload_json_schema, write_payload


class EngineChoice(StrEnum):
    """The CLI's engine argument (typer needs an Enum); a unit test holds it to ENGINE_NAMES."""

    vllm = "vllm"
    sglang = "sglang"


class Mode(StrEnum):
    remote = "remote"


# RunSpec field -> the option a user typed: validation errors name the option.
OPTION_OF: Final[dict[str, str]] = {
    **{name: "--" + name.replace("_", "-") for name in RunSpec.model_fields},
    "engine": "ENGINE",
    "request_timeout_s": "--request-timeout",
    "stall_timeout_s": "--stall-timeout",
}


def run(
    engine: Annotated[EngineChoice, typer.Argument(help="engine behind --base-url")],
    base_url: Annotated[str, typer.Option(help="server root, e.g. http://127.0.0.1:8000")],
    hf_id: Annotated[str, typer.Option(help="Hugging Face id of the target model")],
    served_model: Annotated[str, typer.Option(help="model name the server serves")],
    quantization: Annotated[str, typer.Option(help="label, e.g. GPTQ-4bit")],
    hardware: Annotated[Path, typer.Option(help="hardware.json (lmx shape)")],
    prompt_tokens: Annotated[
        int, typer.Option(help="prompt length P, server-counted", max=MAX_TOKENS)
    ],
    max_tokens: Annotated[int, typer.Option(help="output tokens M per request", max=MAX_TOKENS)],
    out: Annotated[Path, typer.Option(help="payload file to write")],
    mode: Annotated[Mode, typer.Option(help="only 'remote': the server already runs")] = (
        Mode.remote
    ),
    spec_method: Annotated[
        str, typer.Option(help="dflash, mtp, draft_model, ngram or none")
    ] = "none",
    spec_num_tokens: Annotated[int | None, typer.Option(help="speculative tokens")] = None,
    spec_draft_model: Annotated[str | None, typer.Option(help="draft model id")] = None,
    concurrency: Annotated[
        int, typer.Option(help="streams per iteration", max=MAX_CONCURRENCY)
    ] = 1,
    warmup: Annotated[int, typer.Option(help="warmup iterations", max=MAX_ITERATIONS)] = 2,
    iterations: Annotated[int, typer.Option(help="measured iterations", max=MAX_ITERATIONS)] = 5,
    temperature: Annotated[
        float, typer.Option(help="sampling temperature", parser=number(NON_NEGATIVE))
    ] = 0.0,
    logprob_probes: Annotated[
        int,
        typer.Option(
            help="greedy requests re-sent with logprobs after the timed iterations, for the "
            f"report's lossless check (at most {MAX_PROBES}; 0: none, for an engine that "
            "cannot serve logprobs)"
        ),
    ] = MAX_PROBES,
    tokenizer: Annotated[
        Path | None,
        typer.Option(
            help="folder with the target's tokenizer.json (default: the target's snapshot in "
            "the local Hugging Face cache, if there; else the server's own count is used)"
        ),
    ] = None,
    prompt_seed: Annotated[
        int | None,
        typer.Option(
            help="seed of the prompt nonces: two runs with the same seed and concurrency send "
            "identical prompts in the same order (compare greedy outputs across servers)"
        ),
    ] = None,
    allow_prompt_mismatch: Annotated[
        bool, typer.Option(help="record a prompt-count mismatch as a warning, not an error")
    ] = False,
    prompt_set: Annotated[
        Path | None,
        typer.Option(
            help="JSONL prompt set of real text, a category per line (instead of the "
            "exact-length synthetic prompts; --prompt-tokens then only labels): each category "
            "is measured as its own windows"
        ),
    ] = None,
    enable_thinking: Annotated[
        bool | None,
        typer.Option(
            "--enable-thinking/--no-enable-thinking",
            help="sent as chat_template_kwargs.enable_thinking (default: not sent)",
        ),
    ] = None,
    request_timeout: Annotated[
        float, typer.Option(help="seconds per request", parser=number(TIMEOUT_S))
    ] = 600.0,
    stall_timeout: Annotated[
        float,
        typer.Option(
            help="seconds without a byte, once a stream has begun, before it counts as stalled",
            parser=number(TIMEOUT_S),
        ),
    ] = 120.0,
    simulated: Annotated[
        bool, typer.Option(help="label the payload SIMULATED (automatic for the emulator)")
    ] = False,
    engine_version: Annotated[str | None, typer.Option(help="engine version")] = None,
    model_revision: Annotated[str | None, typer.Option(help="model revision")] = None,
    tensor_parallel: Annotated[int, typer.Option(help="tensor-parallel size")] = 1,
    prefix_caching: Annotated[
        bool | None, typer.Option("--prefix-caching/--no-prefix-caching")
    ] = None,
    gpu_mem_util: Annotated[
        float | None, typer.Option(help="GPU memory fraction", parser=number(MEMORY_FRACTION))
    ] = None,
    command_snippet: Annotated[str | None, typer.Option(help="server command line")] = None,
    run_id: Annotated[str | None, typer.Option(help="run id")] = None,
    config_name: Annotated[str | None, typer.Option(help="configuration name")] = None,
    telemetry: Annotated[
        bool,
        typer.Option(
            "--telemetry/--no-telemetry",
            help="sample GPU power/clocks/throttling through NVML when it is usable here",
        ),
    ] = True,
) -> None:
    """Measure one running engine endpoint and write a payload (exit 1 if the run is invalid)."""
    hw = _read_inputs(out, hardware, prompt_set, tokenizer)
    try:
        spec = RunSpec(
            engine=engine.value,
            base_url=base_url,
            hf_id=hf_id,
            served_model=served_model,
            quantization=quantization,
            hardware=hw,
            spec_method=spec_method,
            spec_num_tokens=spec_num_tokens,
            spec_draft_model=spec_draft_model,
            prompt_tokens=prompt_tokens,
            max_tokens=max_tokens,
            concurrency=concurrency,
            warmup=warmup,
            iterations=iterations,
            tokenizer=tokenizer or find_cached_tokenizer(hf_id),
            allow_prompt_mismatch=allow_prompt_mismatch,
            prompt_seed=prompt_seed,
            request_timeout_s=request_timeout,
            stall_timeout_s=stall_timeout,
            simulated=simulated,
            run_id=run_id,
            config_name=config_name,
            command=["specbench", *sys.argv[1:]],
            engine_version=engine_version,
            tensor_parallel=tensor_parallel,
            prefix_caching=prefix_caching,
            gpu_mem_util=gpu_mem_util,
            command_snippet=command_snippet,
            model_revision=model_revision,
            temperature=temperature,
            logprob_probes=logprob_probes,
            prompt_set=(
                read_prompt_set(prompt_set, prompt_set.stem, None, "--prompt-set")
                if prompt_set is not None
                else None
            ),
            enable_thinking=enable_thinking,
        )
    except ValidationError as err:
        raise describe_validation_error("specbench run", err, OPTION_OF) from None
    try:
        split_base_url(base_url)
    except ValueError as err:
        raise InputError("--base-url", str(err)) from None
    payload = _measure_with_telemetry(spec, warmup + iterations, telemetry=telemetry)
    write_payload(out, payload)
    _print_result(out, payload, concurrency)


def _read_inputs(
    out: Path, hardware: Path, prompt_set: Path | None, tokenizer: Path | None
) -> Hardware:
    """The hardware record, with every path checked before measuring: a long run must not be
    lost to a bad path at the end, and the payload never replaces a file the run reads."""
    inputs = [p for p in (hardware, prompt_set, tokenizer) if p is not None]
    check_output_file(out, "--out", inputs=inputs)
    hw = read_json_model(hardware, Hardware, source=f"--hardware {hardware}")
    ensure_writable_file(out, "--out")
    if tokenizer is not None:
        tok_file = tokenizer / "tokenizer.json" if tokenizer.is_dir() else tokenizer
        if not tok_file.is_file():
            raise InputError("--tokenizer", f"{tok_file} does not exist (expected tokenizer.json)")
    return hw


def _measure_with_telemetry(spec: RunSpec, iterations: int, *, telemetry: bool) -> Payload:
    """Measure ``spec`` with the NVML sampler running where it is usable, stopped however the
    measurement ends."""
    # No auto-refresh: a render thread would compete for the GIL while streams are timed; the
    # bar is redrawn only between iterations.
    started = open_sampler() if telemetry else SamplerStart(None, "--no-telemetry given")
    try:
        with ProgressBar(iterations, transient=True, log_iterations=True) as progress:
            return measure(
                spec,
                progress,
                telemetry=started.sampler,
                no_telemetry_reason=started.reason,
            )
    finally:
        if started.sampler is not None:
            started.sampler.stop()


def _print_result(out: Path, payload: Payload, concurrency: int) -> None:
    """The payload's headline figures, its warnings, and (exit 1) why it is invalid."""
    label = " [SIMULATED]" if payload.simulated else ""
    label += " [TOY MODEL]" if payload.evidence.run.toy_model else ""
    verdict = payload.evidence.validity
    typer.echo(
        f"{out}: decode {payload.tokSOut:.2f} tok/s (per-stream mean), TTFT "
        f"{payload.ttftMs:.2f} ms, concurrency {concurrency}{label}"
    )
    for r in verdict.reasons:
        if r.severity == "warning":
            typer.echo(f"WARNING {r.code}: {r.message}", err=True)
    if not verdict.valid:
        for r in verdict.reasons:
            typer.echo(f"INVALID {r.code}: {r.message}", err=True)
        raise typer.Exit(1)


def validate(
    files: Annotated[
        list[Path],
        typer.Argument(help="payload files", exists=True, dir_okay=False, readable=True),
    ],
    as_json: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
) -> None:
    """Offline dry-run validator: exit 0 when every file is valid, 1 with file, JSON path and
    reason for each problem."""

    problems = [p for f in files for p in check_payload_file(f)]
    errors = [p for p in problems if p.severity == "error"]
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "valid": not errors,
                    "files": [str(f) for f in files],
                    "problems": [p.model_dump() for p in problems],
                },
                indent=2,
            )
        )
    else:
        for p in problems:
            typer.echo(f"{p.file}: {p.path}: {p.severity}: {p.reason}")
        bad = {p.file for p in errors}
        for f in files:
            if str(f) not in bad:
                typer.echo(f"{f}: ok")
    if errors:
        raise typer.Exit(1)


schema_app = typer.Typer(help="Print JSON Schemas of specbench files.", no_args_is_help=True)


@schema_app.command("payload")
def schema_payload() -> None:
    """Print the JSON Schema of a payload."""

    typer.echo(json.dumps(payload_json_schema(), indent=2))


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""
    app.command("run")(run)
    app.command("validate")(validate)
    app.add_typer(schema_app, name="schema")
