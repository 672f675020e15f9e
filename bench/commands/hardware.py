"""CLI commands: hardware, provenance, probe bandwidth, telemetry-sample, roofline."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError

from bench.commands._params import number
from bench.core import (
    NON_NEGATIVE,
    POSITIVE,
    SAMPLE_INTERVAL_S,
    SAMPLE_SECONDS,
    InputError,
    check_output_file,
    describe_validation_error,
    ensure_writable_file,
    read_json_model,
    write_text,
)
from bench.machine import (
    BandwidthSource,
    Sampler,
    build_hardware,
    capture_hardware,
    capture_provenance,
    card_bandwidth,
    ceiling,
    cpu_only,
    efficiency,
    probe_bandwidth,
    read_dump,
    record_dump,
    summarize_sampler,
)
from bench.schema import Hardware


def _check(inputs: tuple[Path | None, ...] = (), **outputs: Path | None) -> None:
    """Every output option checked before the command measures or writes anything (a folder
    where the file goes, a folder that cannot be made, a file the command reads):
    ``dump=Path`` is ``--dump``."""
    read = [p for p in inputs if p is not None]
    for option, path in outputs.items():
        if path is not None:
            check_output_file(path, f"--{option.replace('_', '-')}", inputs=read)


def _write(out: Path | None, text: str, where: str = "--out") -> None:

    if out is None:
        typer.echo(text)
    else:
        try:
            write_text(ensure_writable_file(out, where), text + "\n")
        except OSError as err:
            raise InputError(where, f"cannot write {out}: {err.strerror or err}") from None
        typer.echo(f"wrote {out}", err=True)


def hardware_cmd(
    out: Annotated[
        Path | None, typer.Option("--out", help="hardware.json (stdout if omitted)")
    ] = None,
    allow_no_gpu: Annotated[
        bool, typer.Option("--allow-no-gpu", help="record CPU_ONLY instead of failing")
    ] = False,
    dump: Annotated[
        Path | None, typer.Option("--dump", help="also write the raw NVML answers here")
    ] = None,
    from_dump: Annotated[
        Path | None,
        typer.Option("--from-dump", help="build from a recorded dump, not this machine"),
    ] = None,
) -> None:
    """Capture this machine's GPUs (NVML, nvidia-smi as fallback) as hardware.json."""
    _check((from_dump,), out=out, dump=dump)
    if out is not None and dump is not None and out.absolute() == dump.absolute():
        raise InputError("--dump", f"{dump} is --out too: give each its own file")

    if from_dump is not None:
        record = build_hardware(read_dump(from_dump))
    else:
        raw, why = record_dump()
        if dump is not None and raw is not None:
            _write(dump, raw.model_dump_json(indent=2), "--dump")
        if raw is not None and raw.gpus:
            record = build_hardware(raw)
        elif allow_no_gpu:
            record = cpu_only(reason=why or None)
        else:
            record = capture_hardware(allow_no_gpu=False)  # raises the InputError with the reason
    _write(out, record.model_dump_json(indent=2))


def provenance_cmd(
    out: Annotated[Path | None, typer.Option("--out", help="provenance.json")] = None,
    experiment: Annotated[
        Path | None, typer.Option("--experiment", help="experiment file to hash")
    ] = None,
    hardware_json: Annotated[
        Path | None, typer.Option("--hardware", help="hardware.json for driver/CUDA")
    ] = None,
) -> None:
    """Record git SHA, versions, driver/CUDA, Docker and container toolkit as provenance.json."""
    _check((experiment, hardware_json), out=out)

    if experiment is not None and not experiment.is_file():
        raise InputError(str(experiment), "experiment file not found")
    hw = None
    if hardware_json is not None:
        hw = read_json_model(hardware_json, Hardware, source=f"--hardware {hardware_json}")
    _write(
        out, capture_provenance(experiment_path=experiment, hardware=hw).model_dump_json(indent=2)
    )


probe_app = typer.Typer(
    help="Measure the machine (bandwidth for the roofline).", no_args_is_help=True
)


@probe_app.command("bandwidth")
def probe_bandwidth_cmd(
    out: Annotated[Path | None, typer.Option("--out", help="JSON result")] = None,
    size_mib: Annotated[int, typer.Option("--size-mib", min=1)] = 2048,
    iterations: Annotated[int, typer.Option("--iterations", min=1)] = 20,
    device: Annotated[int | None, typer.Option("--device", help="one GPU index", min=0)] = None,
) -> None:
    """Device-to-device copy bandwidth through torch (needs torch and a CUDA GPU)."""
    _check(out=out)

    result = probe_bandwidth(size_mib=size_mib, iterations=iterations, device=device)
    for d in result.devices:
        typer.echo(f"GPU {d.index} {d.name}: {d.bandwidthGBs:.0f} GB/s", err=True)
    _write(out, result.model_dump_json(indent=2))


def telemetry_sample_cmd(
    seconds: Annotated[float, typer.Option("--seconds", parser=number(SAMPLE_SECONDS))] = 5.0,
    interval: Annotated[float, typer.Option("--interval", parser=number(SAMPLE_INTERVAL_S))] = 0.1,
    out: Annotated[Path | None, typer.Option("--out", help="raw recording (JSON)")] = None,
) -> None:
    """Debug: sample NVML telemetry for a while and print the window summary."""
    _check(out=out)

    try:
        sampler = Sampler(interval_s=interval).start()
    except Exception as err:
        raise InputError("telemetry-sample", f"NVML unusable here ({err})") from None
    t0 = time.monotonic()
    try:
        time.sleep(seconds)
    finally:
        sampler.stop()
    t1 = t0 + seconds
    if out is not None:
        _write(out, sampler.recording(marks={"start": t0, "end": t1}).model_dump_json(indent=2))
    typer.echo(
        summarize_sampler(sampler, [(t0, t1)]).model_dump_json(indent=2, exclude={"windows"})
    )


def roofline_cmd(
    weights_gb: Annotated[
        float,
        typer.Option("--weights-gb", help="weights read per step, GB", parser=number(POSITIVE)),
    ],
    cards: Annotated[int, typer.Option("--cards", min=1, help="tensor-parallel ranks")] = 1,
    bandwidth_gbs: Annotated[
        float | None,
        typer.Option(
            "--bandwidth-gbs", help="per card; else from --hardware", parser=number(POSITIVE)
        ),
    ] = None,
    hardware_json: Annotated[Path | None, typer.Option("--hardware")] = None,
    kv_bytes_per_token: Annotated[
        float, typer.Option("--kv-bytes-per-token", parser=number(NON_NEGATIVE))
    ] = 0.0,
    context: Annotated[
        float, typer.Option("--context", help="mean context tokens", parser=number(NON_NEGATIVE))
    ] = 0.0,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1)] = 1,
    tokens_per_step: Annotated[
        float, typer.Option("--tokens-per-step", parser=number(POSITIVE))
    ] = 1.0,
    measured: Annotated[
        float | None,
        typer.Option("--measured", help="tok/s to compare", parser=number(POSITIVE)),
    ] = None,
) -> None:
    """Print the bandwidth decode ceiling of a configuration (and a measured efficiency)."""

    source: BandwidthSource = "given"
    if bandwidth_gbs is None:
        if hardware_json is None:
            raise InputError("roofline", "give --bandwidth-gbs or --hardware")
        hw = read_json_model(hardware_json, Hardware, source=f"--hardware {hardware_json}")
        found = card_bandwidth(hw)
        if found is None:
            raise InputError(str(hardware_json), "no known bandwidth for these GPUs")
        bandwidth_gbs, source = found
    try:
        roof = ceiling(
            bandwidth_gbs,
            cards,
            int(weights_gb * 1e9),
            kv_bytes_per_token=kv_bytes_per_token,
            context_tokens=context,
            concurrency=concurrency,
            tokens_per_step=tokens_per_step,
            bandwidth_source=source,
        )
    except ValidationError as err:
        raise describe_validation_error("roofline", err) from None
    except ValueError as err:
        raise InputError("roofline", str(err)) from None
    doc = {"roofline": roof.model_dump()}
    if measured is not None:
        doc["efficiency"] = efficiency(measured, roof).model_dump()
    typer.echo(json.dumps(doc, indent=2))


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""
    app.command("hardware")(hardware_cmd)
    app.command("provenance")(provenance_cmd)
    app.command("telemetry-sample")(telemetry_sample_cmd)
    app.command("roofline")(roofline_cmd)
    app.add_typer(probe_app, name="probe")
