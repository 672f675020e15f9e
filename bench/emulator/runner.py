"""Running an emulated engine: as a process (the CLI, the container) or in a thread (tests).

``serve_in_thread`` returns a handle at once (the port is bound, not yet listening); call
``handle.wait_ready()`` to wait for the end of the emulated load. In a thread, a failure mode
that would end the process (crash at start, exit mid-run) stops the server instead and sets
``handle.exit_code``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import threading
import urllib.request
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TextIO

from bench.core import InputError
from bench.emulator.profile import FailMode, Profile, Verification, load_profile
from bench.emulator.server import EmulatorServer


def resolve_profile(
    engine: str,
    profile: str | Path | Profile | None,
    *,
    fail: Iterable[FailMode | str] = (),
    time_scale: float | None = None,
    exit_code: int | None = None,
    served_model: str | None = None,
    max_running_requests: int | None = None,
    spec_tokens: int | None = None,
    cudagraph_metrics: bool | None = None,
    tensor_parallel: int | None = None,
    eager: bool | None = None,
    per_request_spec_decode_metrics: str | None = None,
    verification: Verification | None = None,
) -> Profile:
    """The profile to run: by name/path (default ``<engine>-dflash``), with overrides."""
    if isinstance(profile, Profile):
        base = profile
    else:
        base = load_profile(profile if profile is not None else f"{engine}-dflash")
    if base.engine != engine:
        raise ValueError(f"profile {base.name!r} is for {base.engine}, not {engine}")
    return base.with_overrides(
        time_scale=time_scale,
        fail=tuple(FailMode(m) for m in fail),
        exit_code=exit_code,
        served_model=served_model,
        max_running_requests=max_running_requests,
        spec_tokens=spec_tokens,
        cudagraph_metrics=cudagraph_metrics,
        tensor_parallel=tensor_parallel,
        eager=eager,
        per_request_spec_decode_metrics=per_request_spec_decode_metrics,
        verification=verification,
    )


class EmulatorHandle:
    """An emulated engine running in a background thread."""

    def __init__(self, profile: Profile, host: str, port: int, seed: int, echo: TextIO | None):
        self.profile = profile
        self.host = host
        self.seed = seed
        self.log_lines: list[str] = []
        self.exit_code: int | None = None
        self._echo = echo
        self._loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._ready = threading.Event()
        self._exited = threading.Event()
        self._error: BaseException | None = None
        self._server: EmulatorServer | None = None
        self._requested_port = port
        self._thread = threading.Thread(target=self._main, name="specbench-emulator", daemon=True)
        self._thread.start()
        self._started.wait(10)
        if self._error is not None:
            raise self._error

    def _log(self, line: str) -> None:
        self.log_lines.append(line)
        if self._echo is not None:
            print(line, file=self._echo, flush=True)

    def _on_exit(self, code: int) -> None:
        self.exit_code = code
        self._exited.set()
        if self._server is not None:
            self._loop.create_task(self._server.stop())

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._server = EmulatorServer(
                self.profile,
                host=self.host,
                port=self._requested_port,
                seed=self.seed,
                log=self._log,
                on_exit=self._on_exit,
            )
            self._loop.run_until_complete(self._server.start())
        except BaseException as err:
            self._error = err
            self._started.set()
            return
        self._started.set()
        self._loop.create_task(self._watch_ready())
        self._loop.run_forever()
        # A server stopped before it was ready leaves _watch_ready waiting: cancel what is left,
        # so closing the loop never destroys a pending task.
        pending = asyncio.all_tasks(self._loop)
        for task in pending:
            task.cancel()
        self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self._loop.run_until_complete(self._loop.shutdown_asyncgens())
        self._loop.close()

    async def _watch_ready(self) -> None:
        assert self._server is not None
        await self._server.ready.wait()
        self._ready.set()

    @property
    def port(self) -> int:
        assert self._server is not None
        return self._server.port

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def phase(self) -> str:
        assert self._server is not None
        return self._server.phase

    def wait_ready(self, timeout: float = 30.0) -> bool:
        """True once /health answers 200; False on timeout or if the server exited."""
        deadline_hit = not self._ready.wait(timeout)
        return not deadline_hit and self.exit_code is None

    def wait_exit(self, timeout: float = 30.0) -> int | None:
        """The exit code once a failure mode ended the emulated process (None on timeout)."""
        self._exited.wait(timeout)
        return self.exit_code

    def truth(self, request_id: str) -> dict[str, Any] | None:
        """The recorded truth of one request (what GET /emulator/truth/{id} returns)."""
        url = f"{self.base_url}/emulator/truth/{request_id}"
        try:
            with urllib.request.urlopen(url, timeout=10) as resp:
                data: dict[str, Any] = json.loads(resp.read())
                return data
        except urllib.error.HTTPError as err:
            if err.code == 404:
                return None
            raise

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        server = self._server

        async def _shutdown() -> None:
            if server is not None and server.phase != "stopped":
                await server.stop()
            self._loop.stop()

        asyncio.run_coroutine_threadsafe(_shutdown(), self._loop)
        self._thread.join(10)

    def __enter__(self) -> EmulatorHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_in_thread(
    engine: str,
    profile: str | Path | Profile | None = None,
    *,
    port: int = 0,
    host: str = "127.0.0.1",
    seed: int = 0,
    fail: Iterable[FailMode | str] = (),
    time_scale: float | None = None,
    exit_code: int | None = None,
    served_model: str | None = None,
    echo: TextIO | None = None,
    tensor_parallel: int | None = None,
) -> EmulatorHandle:
    """Start an emulated ``engine`` ("vllm"|"sglang") in a daemon thread; returns at once."""
    prof = resolve_profile(
        engine,
        profile,
        fail=fail,
        time_scale=time_scale,
        exit_code=exit_code,
        served_model=served_model,
        tensor_parallel=tensor_parallel,
    )
    return EmulatorHandle(prof, host, port, seed, echo)


#: a simulated start-up at least this long is announced on stderr (a wait a person notices)
ANNOUNCE_STARTUP_S = 5.0
#: the time scale the announcement suggests
SUGGESTED_TIME_SCALE = 0.05


def startup_notice(profile: Profile) -> str | None:
    """The one line that says how long the simulated start-up takes and how to shorten it."""
    scale = profile.time_scale
    load = profile.load_s * scale
    warm = profile.warmup_s * scale if profile.engine == "sglang" else 0.0
    total = load + warm
    if total < ANNOUNCE_STARTUP_S:
        return None
    parts = f"a load of {load:.1f} s" + (f" and a warmup of {warm:.1f} s" if warm else "")
    line = (
        f"SIMULATED start-up: profile {profile.name} simulates {parts} "
        f"(time scale {scale:g}) before it serves"
    )
    if scale > SUGGESTED_TIME_SCALE:
        short = total * SUGGESTED_TIME_SCALE / scale
        line += f"; --time-scale {SUGGESTED_TIME_SCALE:g} shortens that to {short:.1f} s"
    return line


async def _show_startup(server: EmulatorServer, out: TextIO, total: float) -> None:
    """A one-line progress display on a terminal until the emulated engine is ready."""
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    while not server.ready.is_set() and server.phase not in ("crashed", "stopped"):
        done = min(loop.time() - t0, total)
        filled = int(20 * done / total) if total > 0 else 20
        out.write(
            f"\r  {server.phase:<8} [{'#' * filled}{'.' * (20 - filled)}] "
            f"{done:5.1f} / {total:.1f} s"
        )
        out.flush()
        try:
            await asyncio.wait_for(server.ready.wait(), timeout=0.5)
        except TimeoutError:
            continue
    if server.ready.is_set():
        url = f"http://{server.host}:{server.port}"
        out.write(f"\r  ready after {loop.time() - t0:.1f} s: {url}{' ' * 20}\n")
    else:
        out.write("\n")
    out.flush()


def run_process(profile: Profile, *, host: str, port: int, seed: int) -> int:
    """Run in the foreground until SIGINT/SIGTERM (exit 0) or a failure mode's exit code.

    A start-up of ANNOUNCE_STARTUP_S or more is announced on stderr (the engine log stays on
    stdout), with a progress line while it lasts when stderr is a terminal."""

    def log(line: str) -> None:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    def hard_exit(code: int) -> None:
        # a crashed engine process ends at once, without closing streams politely
        sys.stdout.flush()
        os._exit(code)

    async def main() -> int:
        server = EmulatorServer(
            profile, host=host, port=port, seed=seed, log=log, on_exit=hard_exit
        )
        try:
            await server.start()
        except OSError as err:  # address in use, unknown host: the user's --host/--port
            raise InputError(
                "--host/--port", f"cannot listen on {host}:{port}: {err.strerror or err}"
            ) from None
        tasks: list[asyncio.Task[None]] = []  # held so the progress task is not collected
        notice = startup_notice(profile)
        if notice is not None:
            sys.stderr.write(notice + "\n")
            sys.stderr.flush()
            if sys.stderr.isatty():
                total = profile.time_scale * (
                    profile.load_s + (profile.warmup_s if profile.engine == "sglang" else 0.0)
                )
                tasks.append(asyncio.create_task(_show_startup(server, sys.stderr, total)))
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        await server.stop()
        return 0

    return asyncio.run(main())
