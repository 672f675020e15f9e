"""CLI command: ``specbench emulate vllm|sglang --port P`` (= ``python -m bench.emulator``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError

from bench.commands._params import number
from bench.core import TIME_SCALE, InputError, describe_validation_error
from bench.emulator.profile import FailMode, ProfileError
from bench.emulator.runner import resolve_profile, run_process


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""

    @app.command("emulate")
    def emulate(
        engine: Annotated[str, typer.Argument(help="Engine shape: vllm or sglang.")],
        port: Annotated[int, typer.Option(help="Port to listen on.", min=0, max=65535)],
        host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
        profile: Annotated[
            str | None,
            typer.Option(help="Shipped profile name or YAML path (default <engine>-dflash)."),
        ] = None,
        seed: Annotated[int, typer.Option(help="Seed of the acceptance/jitter draws.")] = 0,
        fail: Annotated[
            list[str] | None, typer.Option(help="Failure mode (repeatable), e.g. disconnect.")
        ] = None,
        time_scale: Annotated[
            float | None,
            typer.Option(
                help="Multiply every duration (e.g. 0.05 for tests).", parser=number(TIME_SCALE)
            ),
        ] = None,
        exit_code: Annotated[
            int | None,
            typer.Option(help="Exit code of crash_at_start / exit_mid_run.", min=0, max=255),
        ] = None,
        served_model: Annotated[
            str | None, typer.Option(help="Model name served at /v1/models.")
        ] = None,
        max_running_requests: Annotated[
            int | None,
            typer.Option(
                help="Admission cap (the configuration's --max-num-seqs or "
                "--max-running-requests); default from the profile."
            ),
        ] = None,
    ) -> None:
        """Run a SIMULATED vLLM- or SGLang-shaped server with a known schedule (never a
        measurement; every response carries x-specbench-emulator: 1)."""

        if engine not in ("vllm", "sglang"):
            raise InputError("engine", f"{engine!r} is not one of vllm, sglang")
        modes = []
        for m in fail or []:
            try:
                modes.append(FailMode(m))
            except ValueError:
                known = ", ".join(x.value for x in FailMode)
                raise InputError("--fail", f"{m!r} is not one of {known}") from None
        is_path = profile is not None and Path(profile).suffix in (".yaml", ".yml")
        if is_path and not Path(str(profile)).is_file():
            raise InputError("--profile", f"{profile}: no such file")
        try:
            prof = resolve_profile(
                engine,
                profile,
                fail=modes,
                time_scale=time_scale,
                exit_code=exit_code,
                served_model=served_model,
                max_running_requests=max_running_requests,
            )
        except ValidationError as err:
            raise describe_validation_error("emulate", err) from None
        except (ProfileError, ValueError) as err:
            raise InputError("--profile", str(err)) from None
        raise typer.Exit(run_process(prof, host=host, port=port, seed=seed))
