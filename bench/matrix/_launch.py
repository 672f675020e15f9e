"""Server lifecycle for the matrix: start, wait until ready, read the log, stop.

Two launchers share one shape (``Launcher.start(...) -> Server``):
- ``DockerLauncher``: the docker SDK runs the ``ContainerSpec`` the engine adapter builds (GPU
  device requests, ipc=host, port published on 127.0.0.1 only, models mounted read-only, the HF
  token in the environment only, labels with run id and configuration).
- ``ProcessLauncher``: the emulator as a local process (demo, integration tests), or with
  ``engine=True`` the engine's own server argv on this host (an engine installed without
  Docker, as on the device machine), its output going straight to the log file.
Every log the matrix keeps goes through ``scrub`` so the token never reaches a file.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Protocol

import httpx

from bench.core import InputError, RunError, open_stream, read_log
from bench.engines import LABEL_MANAGED, TOKEN_ENV, ContainerSpec
from bench.engines._scrub import scrub

TAIL_LINES = 40


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def tail(text: str, n: int = TAIL_LINES, polled: tuple[str, ...] = ()) -> str:
    """The last ``n`` lines, without the server's access-log lines of our own polls of
    ``polled`` (a server that never got ready logs little else: SGLang four 503 lines a second)."""
    marks = tuple(f'"GET {p} ' for p in polled)
    lines = [ln for ln in text.splitlines() if not any(m in ln for m in marks)]
    return "\n".join(lines[-n:])


class Server(Protocol):
    """A started server."""

    base_url: str

    def alive(self) -> bool: ...

    def exit_code(self) -> int | None: ...

    def restarts(self) -> int: ...

    def log_text(self) -> str: ...

    def stop(self) -> None: ...


class Launcher(Protocol):
    def start(self, spec: ContainerSpec, log_path: Path) -> Server: ...


def wait_ready(
    server: Server,
    *,
    paths: tuple[str, ...],
    timeout_s: float,
    what: str,
    poll_s: float = 0.25,
) -> float:
    """Poll ``paths`` until all answer 200; fail fast when the server exits. Returns seconds."""
    start = time.monotonic()
    deadline = start + timeout_s
    with httpx.Client(timeout=5.0) as client:
        while True:
            if not server.alive():
                raise RunError(
                    f"{what}: server exited (code {server.exit_code()}) before it was ready; "
                    f"last log lines:\n{scrub(tail(server.log_text(), polled=paths))}"
                )
            try:
                if all(client.get(server.base_url + p).status_code == 200 for p in paths):
                    return time.monotonic() - start
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RunError(
                    f"{what}: not ready after {timeout_s:.0f} s; last log lines:\n"
                    f"{scrub(tail(server.log_text(), polled=paths))}"
                )
            time.sleep(poll_s)


# -- local processes ------------------------------------------------------------------------


def _die_with_parent() -> None:
    """Child side: get SIGTERM when the matrix dies, even by SIGKILL (Linux prctl)."""
    with contextlib.suppress(Exception):
        # Linux-only prctl call, loaded in the child process that uses it
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class ProcessServer:
    def __init__(self, proc: subprocess.Popen[bytes], base_url: str, log_path: Path) -> None:
        self.proc = proc
        self.base_url = base_url
        self.log_path = log_path

    def alive(self) -> bool:
        return self.proc.poll() is None

    def exit_code(self) -> int | None:
        return self.proc.poll()

    def restarts(self) -> int:
        return 0

    def log_text(self) -> str:
        try:
            return read_log(self.log_path)
        except InputError:
            return ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


class ProcessLauncher:
    """Runs ``spec.entrypoint + spec.command`` as a local process: the emulator, or with
    ``engine=True`` the engine's server argv as given (``vllm serve ...`` found on PATH).

    The HF token is not passed on: the emulator needs none, a local engine reads local models,
    and leaving it out keeps it out of the process log by construction."""

    def __init__(self, *, engine: bool = False) -> None:
        self.engine = engine

    def argv(self, spec: ContainerSpec) -> list[str]:
        """The process ``start`` runs for ``spec`` (``python``: the interpreter running this)."""
        argv = [*spec.entrypoint, *spec.command]
        if (
            not self.engine
            and argv[:3] != ["python", "-m", "bench.emulator"]
            and argv[0] != "python"
        ):
            argv = ["python", "-m", "bench.emulator", *argv]
        return argv

    def start(self, spec: ContainerSpec, log_path: Path) -> ProcessServer:
        argv = self.argv(spec)
        if argv[0] == "python":
            argv[0] = sys.executable
        env = {
            k: v for k, v in os.environ.items() if k not in (TOKEN_ENV, "HUGGING_FACE_HUB_TOKEN")
        } | dict(spec.env)
        with open_stream(log_path) as fh:
            proc = subprocess.Popen(
                argv,
                stdout=fh,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                preexec_fn=_die_with_parent,
            )
        return ProcessServer(proc, f"http://127.0.0.1:{spec.host_port}", log_path)


# -- docker ---------------------------------------------------------------------------------


class DockerServer:
    def __init__(self, container: Any, base_url: str) -> None:
        self.container = container
        self.base_url = base_url
        self._stopped = False
        self._final_log: str | None = None

    def _reload(self) -> None:
        with contextlib.suppress(Exception):
            self.container.reload()

    def alive(self) -> bool:
        self._reload()
        return bool(self.container.status in ("created", "running", "restarting"))

    def exit_code(self) -> int | None:
        self._reload()
        state = self.container.attrs.get("State", {})
        return None if state.get("Running") else state.get("ExitCode")

    def restarts(self) -> int:
        self._reload()
        return int(self.container.attrs.get("RestartCount", 0) or 0)

    def log_text(self) -> str:
        if self._final_log is not None:
            return self._final_log
        try:
            raw = self.container.logs(stdout=True, stderr=True)
        except Exception:
            return ""
        return scrub(raw.decode("utf-8", errors="replace"))

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        with contextlib.suppress(Exception):
            self.container.stop(timeout=10)
        # The log dies with the container: keep it (the matrix writes it after stopping).
        self._final_log = self.log_text()
        with contextlib.suppress(Exception):
            self.container.remove(force=True)


class DockerLauncher:
    """Starts containers with the docker SDK from a ``ContainerSpec``."""

    def __init__(self, client: Any = None) -> None:
        if client is None:
            # optional at import time: the docker SDK loads only when a container is really started
            import docker

            try:
                client = docker.from_env()  # type: ignore[attr-defined]
            except docker.errors.DockerException as err:  # type: ignore[attr-defined]
                raise InputError(
                    "--launcher",
                    f"docker: the Docker engine does not answer ({err}); start it "
                    "(`sudo systemctl start docker`) or run the servers as local processes "
                    "with --launcher process",
                ) from None
        self.client = client

    def run_kwargs(self, spec: ContainerSpec) -> dict[str, Any]:
        """The SDK arguments for ``spec`` (tests check them without starting anything)."""
        # optional at import time: the docker SDK loads only when a container is really started
        import docker

        env = {}
        for name in spec.env_names:
            if os.environ.get(name):
                env[name] = os.environ[name]
        env.update(spec.env)
        kwargs: dict[str, Any] = {
            "image": spec.image,
            "entrypoint": spec.entrypoint or None,
            "command": spec.command,
            "detach": True,
            "name": spec.name,
            "labels": spec.labels,
            "environment": env,
            "ports": {f"{spec.container_port}/tcp": (spec.host_ip, spec.host_port)},
            "volumes": {h: {"bind": c, "mode": m} for h, c, m in spec.volumes},
        }
        if spec.gpus:
            kwargs["device_requests"] = [
                docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])  # type: ignore[attr-defined]
            ]
        if spec.ipc_host:
            kwargs["ipc_mode"] = "host"
        elif spec.shm_size:
            kwargs["shm_size"] = spec.shm_size
        return kwargs

    def check_image(self, spec: ContainerSpec) -> None:
        """A local build is pinned by image ID: refuse a tag that points at another build."""
        if spec.image_id is None:
            return
        try:
            found = self.client.images.get(spec.image).id
        except Exception as err:
            raise RunError(f"image {spec.image} is not on this host: {scrub(str(err))}") from None
        if found != spec.image_id:
            raise RunError(
                f"image {spec.image} has ID {found}, pinned {spec.image_id} (the experiment "
                "or its pins lock): build it from the pinned inputs (docker/sglang), or, if "
                "this build is the one you mean, `specbench pins forget <experiment> --image "
                "KEY --host HOST` and run again to pin it"
            )

    def _existing(self, name: str) -> Any | None:
        try:
            return self.client.containers.get(name)
        except Exception:  # docker.errors.NotFound, or no such container in a fake client
            return None

    def _create(self, kwargs: dict[str, Any]) -> Any:
        """containers.create, pulling a missing image first as containers.run does."""
        try:
            return self.client.containers.create(**kwargs)
        except Exception as err:
            if type(err).__name__ != "ImageNotFound":
                raise
        self.client.images.pull(kwargs["image"])
        return self.client.containers.create(**kwargs)

    def start(self, spec: ContainerSpec, log_path: Path) -> DockerServer:
        self.check_image(spec)
        kwargs = self.run_kwargs(spec)
        before = self._existing(spec.name) if spec.name else None
        if before is not None:
            # A container of this name that still runs is a live server (a matrix of the same run
            # id resumed while the first still runs, say): never removed from here. A stopped
            # one is the leftover of a run that died, and is cleared.
            before.reload()
            if before.status in ("created", "running", "restarting"):
                raise RunError(
                    f"a container named {spec.name} is {before.status} (id {before.short_id}):"
                    " another matrix of this run is using it. Let it finish, or stop it"
                    f" (docker stop {spec.name}) and resume"
                )
            before.remove(force=True)
        # create, then start: a failed create (a name conflict with a container another matrix
        # just started) leaves nothing of ours to remove; a failed start leaves ours, removed
        try:
            container = self._create(kwargs)
        except Exception as err:
            raise RunError(
                f"cannot create container from {spec.image}: {scrub(str(err))}"
            ) from None
        try:
            container.start()
        except Exception as err:
            with contextlib.suppress(Exception):
                container.remove(force=True)
            raise RunError(f"cannot start container from {spec.image}: {scrub(str(err))}") from None
        return DockerServer(container, f"http://127.0.0.1:{spec.host_port}")

    def leftovers(self, run_id: str | None = None) -> list[Any]:
        """Containers we started that still exist (all runs, or one run)."""
        label = f"{LABEL_MANAGED}=true"
        found = self.client.containers.list(all=True, filters={"label": label})
        if run_id is None:
            return list(found)
        return [c for c in found if c.labels.get("specbench.run_id") == run_id]
