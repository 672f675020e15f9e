"""What every engine adapter provides, and the container description both launchers share.

The docker SDK launcher and ``specbench plan``'s ``docker run`` line are rendered from the same
``ContainerSpec``, so what the plan prints is what the matrix starts.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bench.core import EMULATOR_IMAGE

if TYPE_CHECKING:
    from bench.schema import Configuration, Experiment

# Container label keys: every container we start carries them, so a sweep can find leftovers.
LABEL_MANAGED = "specbench.managed"
LABEL_RUN = "specbench.run_id"
LABEL_CONFIG = "specbench.config"
# Passed by name only: the value comes from the caller's environment, never from a file.
TOKEN_ENV = "HF_TOKEN"
# Host folder holding the models (mounted read-only at /models); Ansible downloads into it.
DEFAULT_MODEL_CACHE = "/var/lib/specbench/models"


@dataclass(frozen=True)
class LogPattern:
    """A load-log line that matters: ``severity='invalid'`` makes the run invalid."""

    code: str
    regex: str
    message: str
    source: str
    severity: str = "invalid"
    speculative_only: bool = False

    def search(self, line: str) -> re.Match[str] | None:
        return re.search(self.regex, line)


@dataclass(frozen=True)
class ResolvedPattern:
    """One setting the engine resolves at start and states in its own log (the attention
    backend, the graph mode of a phase): ``name`` gets group 1 of the first line matching
    ``regex``, or ``value`` when given. Patterns of the same name are tried in order."""

    name: str
    regex: str
    source: str
    value: str | None = None


def resolved_settings(log: str, patterns: tuple[ResolvedPattern, ...]) -> dict[str, str]:
    """What the engine itself resolved, read from its log: ``{name: value}`` for every name
    some pattern found (a name no line states is left out, never guessed)."""
    out: dict[str, str] = {}
    for pat in patterns:
        if pat.name in out:
            continue
        m = re.search(pat.regex, log, flags=re.MULTILINE)
        if m is not None:
            out[pat.name] = pat.value if pat.value is not None else m.group(1)
    return out


@dataclass(frozen=True)
class GraphPatterns:
    """How an engine's own log shows CUDA graphs: captured at start, and used per step.

    ``captured`` lines name what was captured (group 1: e.g. ``target verify``); the
    configuration needs the phase ``needed(speculative)``. ``disabled`` lines say graphs are
    off. ``use`` matches a per-step (or per-interval) line whose group 1 is the graph state of
    the steps it covers; ``used_values`` are the states that mean "ran on a graph".
    ``use_needs_flag``: the server flag without which the engine logs no ``use`` line."""

    captured: LogPattern
    disabled: tuple[LogPattern, ...]
    use: LogPattern
    used_values: frozenset[str]
    baseline_phase: str
    speculative_phase: str
    use_needs_flag: str | None = None
    #: the line that opens a capture (group 1: what is captured); a begin with no ``captured``
    #: line after it, in a server that never got ready, is a hang inside the capture
    capture_begin: LogPattern | None = None

    def needed(self, speculative: bool) -> str:
        return self.speculative_phase if speculative else self.baseline_phase


@dataclass(frozen=True)
class WarmupPatterns:
    """An engine that sends itself a warm-up request before it says it is ready: ``up`` is the
    line of its HTTP side starting (the warm-up begins then), ``done`` the line it logs once the
    warm-up answered. A server still alive at the ready timeout with ``up`` and no ``done`` was
    inside its first forward pass (seen: SGLang 0.5.17 JIT-compiling a GPTQ GEMM with nvcc)."""

    up: LogPattern
    done: LogPattern


@dataclass(frozen=True)
class ContainerSpec:
    """Everything needed to start one server container (docker SDK or ``docker run``)."""

    image: str
    entrypoint: list[str]
    command: list[str]
    container_port: int
    host_port: int
    host_ip: str = "127.0.0.1"
    env_names: tuple[str, ...] = (TOKEN_ENV,)
    volumes: tuple[tuple[str, str, str], ...] = ()  # (host, container, mode)
    labels: dict[str, str] = field(default_factory=dict)
    gpus: bool = True
    ipc_host: bool = True
    shm_size: str | None = None
    name: str | None = None
    image_id: str | None = None  # a local build's pinned ID: the launcher refuses another
    #: settings passed by value (never a secret: a synthetic-acceptance control's engine knob)
    env: tuple[tuple[str, str], ...] = ()

    def run_line(self) -> str:
        """The equivalent ``docker run`` command line (env values are never printed)."""
        parts: list[str] = ["docker", "run", "--rm", "-d"]
        if self.name:
            parts += ["--name", self.name]
        if self.gpus:
            parts += ["--gpus", "all"]
        if self.ipc_host:
            parts += ["--ipc=host"]
        elif self.shm_size:
            parts += ["--shm-size", self.shm_size]
        parts += ["-p", f"{self.host_ip}:{self.host_port}:{self.container_port}"]
        for host, cont, mode in self.volumes:
            parts += ["-v", f"{host}:{cont}:{mode}"]
        for env in self.env_names:
            parts += ["-e", env]
        for name, value in self.env:
            parts += ["-e", f"{name}={value}"]
        for key in sorted(self.labels):
            parts += ["--label", f"{key}={self.labels[key]}"]
        if self.entrypoint:
            parts += ["--entrypoint", self.entrypoint[0], self.image, *self.entrypoint[1:]]
        else:
            parts.append(self.image)
        parts += self.command
        return shlex.join(parts)


def flag_value(args: list[str], flag: str) -> str | None:
    """The value of ``flag`` in ``args`` (``--f v`` or ``--f=v``); '' for a bare flag."""
    for i, a in enumerate(args):
        if a == flag:
            nxt = args[i + 1] if i + 1 < len(args) else ""
            return "" if nxt.startswith("--") else nxt
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


def with_flag(args: list[str], flag: str, value: str) -> list[str]:
    """``args`` with ``flag``'s value replaced (``--f v`` or ``--f=v``); KeyError if absent."""
    out = list(args)
    for i, a in enumerate(out):
        if a == flag and i + 1 < len(out):
            out[i + 1] = value
            return out
        if a.startswith(flag + "="):
            out[i] = f"{flag}={value}"
            return out
    raise KeyError(flag)


def has_flag(args: list[str], prefix: str) -> list[str]:
    """Flags in ``args`` that start with ``prefix`` (e.g. '--speculative')."""
    return [a.split("=", 1)[0] for a in args if a.startswith(prefix)]


class Engine:
    """Base adapter. Subclasses fill in the class attributes and the argv/check methods."""

    name: str = ""
    program: tuple[str, ...] = ()
    container_port: int = 8000
    health_path: str = "/health"
    ready_path: str = "/v1/models"
    metrics_path: str = "/metrics"
    # Where the running server says its own version: GET path -> JSON object, its key.
    version_path: str = ""
    version_key: str = "version"
    load_patterns: tuple[LogPattern, ...] = ()
    graph_patterns: GraphPatterns | None = None
    warmup_patterns: WarmupPatterns | None = None
    #: a periodic line carrying the engine's own acceptance length (group 1)
    accept_length_pattern: LogPattern | None = None
    #: seconds between the engine's periodic stats records (graph use, acceptance length), when
    #: they are time-based: a measured window shorter than this logs none of its own
    stats_interval_s: float | None = None
    #: settings the engine resolves itself and logs (attention backend, graph mode per phase)
    resolved_patterns: tuple[ResolvedPattern, ...] = ()
    #: observability flags the emulator is told about, so it logs what the server would
    emulator_passthrough: tuple[str, ...] = ()
    #: server flags with a value the emulator takes too (flag, value)
    emulator_value_passthrough: tuple[str, ...] = ()
    #: (flag, value) pairs that make the server run eager (value None: the flag alone); the
    #: emulator standing in for such a configuration is started with --eager
    eager_flags: tuple[tuple[str, str | None], ...] = ()
    version_regex: str = ""
    # The engine's own start-up record of its tensor-parallel size (group 1), one line.
    tensor_parallel_regex: str = ""
    ready_regex: str = ""
    # Flags the adapter itself adds; a configuration must not repeat them.
    plumbing_flags: tuple[str, ...] = ("--host", "--port")
    #: the server flag that caps running requests (the emulator is given the same cap)
    admission_flag: str | None = None

    def model_args(self, model_path: str) -> list[str]:
        raise NotImplementedError

    def plumbing_args(self, experiment: Experiment, host: str, port: int) -> list[str]:
        raise NotImplementedError

    def spec_problems(self, cfg: Configuration, experiment: Experiment) -> list[str]:
        raise NotImplementedError

    def server_argv(
        self,
        cfg: Configuration,
        experiment: Experiment,
        *,
        host: str = "0.0.0.0",
        port: int | None = None,
    ) -> list[str]:
        """The exact server argv inside the container: program, model, seed flags, plumbing.

        Pure: depends on nothing but its arguments. ``host`` is the in-container bind address
        (the port is published on 127.0.0.1 only)."""
        return [
            *self.program,
            *self.model_args(experiment.target_for(cfg).path),
            *cfg.args,
            *self.plumbing_args(experiment, host, port or self.container_port),
        ]

    def check(self, cfg: Configuration, experiment: Experiment) -> list[str]:
        """Problems with ``cfg``'s flags for this engine (empty when consistent)."""
        problems = [
            f"flag {f} is added by specbench; remove it from args"
            for f in self.plumbing_flags
            if flag_value(cfg.args, f) is not None
        ]
        return problems + self.spec_problems(cfg, experiment)

    # Log lines in which the engine states the admission cap it resolved (group 1: the cap).
    admission_regexes: tuple[str, ...] = ()

    def tensor_parallel_from_log(self, text: str) -> tuple[int, str] | None:
        """The tensor-parallel size the engine logged at start, and the line's excerpt around
        it; the last such record (a resumed server's log follows the earlier one)."""
        found: tuple[int, str] | None = None
        if not self.tensor_parallel_regex:
            return None
        for m in re.finditer(self.tensor_parallel_regex, text):
            lo, hi = m.start(1), m.end(1)
            excerpt = text[max(m.start(), lo - 40) : min(len(text), hi + 20)].strip()
            found = (int(m.group(1)), excerpt)
        return found

    def admission_from_log(self, text: str) -> tuple[int, str] | None:
        """The live-request cap the engine logged it enforces, and the line; the last one."""
        found: tuple[int, str] | None = None
        for line in text.splitlines():
            for rx in self.admission_regexes:
                m = re.search(rx, line)
                if m:
                    found = (int(m.group(1)), line.strip())
        return found

    def depth_args(self, args: list[str], k: int) -> list[str]:
        """``args`` rewritten to draft ``k`` tokens per step (a depth sweep's one point)."""
        raise NotImplementedError(f"{self.name}: no speculative-depth rewrite")

    def emulator_argv(
        self, cfg: Configuration, *, host: str, port: int, served_model: str | None = None
    ) -> list[str]:
        """Argv of the emulator standing in for this configuration."""
        argv = ["python", "-m", "bench.emulator", self.name, "--host", host, "--port", str(port)]
        argv += ["--profile", cfg.emulator.profile]
        cap = flag_value(cfg.args, self.admission_flag) if self.admission_flag else None
        if cap is not None:  # the emulator admits what the real server would
            argv += ["--max-running-requests", cap]
        if served_model:
            argv += ["--served-model", served_model]
        if cfg.spec_num_tokens is not None:  # the emulator drafts as deep as the server would
            argv += ["--spec-tokens", str(cfg.spec_num_tokens)]
        for mode in cfg.emulator.fail:
            argv += ["--fail", mode]
        argv += [f for f in self.emulator_passthrough if flag_value(cfg.args, f) is not None]
        for f in self.emulator_value_passthrough:
            value = flag_value(cfg.args, f)
            if value is not None:
                argv += [f, value]
        if self.runs_eager(cfg.args):
            argv.append("--eager")
        return argv

    def runs_eager(self, args: list[str]) -> bool:
        """Whether ``args`` tell the server to run without graphs (``eager_flags``)."""
        for flag, value in self.eager_flags:
            given = flag_value(args, flag)
            if given is not None and (value is None or given == value):
                return True
        return False

    def container_spec(
        self,
        cfg: Configuration,
        experiment: Experiment,
        *,
        host_port: int,
        model_cache: str,
        run_id: str,
        image_override: str | None = None,
        emulate_argv: list[str] | None = None,
    ) -> ContainerSpec:
        """The container for ``cfg``. With ``emulate_argv`` the emulator image runs instead."""
        image = experiment.image_for(cfg)
        labels = {LABEL_MANAGED: "true", LABEL_RUN: run_id, LABEL_CONFIG: cfg.name}
        if emulate_argv is not None:
            # The emulator image's ENTRYPOINT is ``python -m bench.emulator``: pass the rest.
            rest = emulate_argv[emulate_argv.index("bench.emulator") + 1 :]
            return ContainerSpec(
                image=image_override or EMULATOR_IMAGE,
                entrypoint=[],
                command=rest,
                container_port=self.container_port,
                host_port=host_port,
                labels=labels,
                gpus=False,
                ipc_host=False,
                shm_size=None,
                name=f"specbench-{run_id}-{cfg.name}",
                env_names=(TOKEN_ENV,),
            )
        argv = self.server_argv(cfg, experiment)
        return ContainerSpec(
            image=image_override or image.ref,
            entrypoint=argv[:1],
            command=argv[1:],
            container_port=self.container_port,
            host_port=host_port,
            volumes=((model_cache, "/models", "ro"),),
            labels=labels,
            gpus=image.device == "cuda",
            ipc_host=experiment.server.ipc_host,
            shm_size=experiment.server.shm_size,
            name=f"specbench-{run_id}-{cfg.name}",
            image_id=image.local_image_id if image_override is None else None,
        )

    def docker_run_line(
        self,
        cfg: Configuration,
        experiment: Experiment,
        *,
        host_port: int | None = None,
        model_cache: str = DEFAULT_MODEL_CACHE,
        run_id: str = "RUN_ID",
    ) -> str:
        spec = self.container_spec(
            cfg,
            experiment,
            host_port=host_port or self.container_port,
            model_cache=model_cache,
            run_id=run_id,
        )
        return spec.run_line()

    def periodic_patterns(self, cfg: Configuration) -> tuple[LogPattern, ...]:
        """The periodic lines ``cfg``'s server logs about its measured steps: graph use (when
        logged without a flag, or the flag is set) and, with speculation, acceptance length."""
        found: list[LogPattern] = []
        g = self.graph_patterns
        if g is not None and (
            g.use_needs_flag is None or flag_value(cfg.args, g.use_needs_flag) is not None
        ):
            found.append(g.use)
        if cfg.speculative and self.accept_length_pattern is not None:
            found.append(self.accept_length_pattern)
        return tuple(found)

    def version_from_log(self, text: str) -> str | None:
        m = re.search(self.version_regex, text) if self.version_regex else None
        return m.group(1) if m else None
