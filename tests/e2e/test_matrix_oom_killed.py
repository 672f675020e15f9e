"""A container the kernel's OOM killer ends at start-up (issue 38, fault 7): the emulator image
under a memory limit its Python cannot start in, so the kill is real (exit 137, as Docker
reports an OOM-killed container). The configuration fails naming the code and what sends it,
no traceback, and the matrix goes on: the next configuration runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from bench.engines import ContainerSpec, load_experiment
from bench.matrix import Artifacts, DockerLauncher, MatrixOptions, run_matrix
from bench.schema import EXPERIMENTS_DIR, read_payload

LIMIT = "12m"  # the emulator's interpreter and imports need several times this


class MemoryLimitedLauncher(DockerLauncher):
    """vllm-baseline's container gets a memory limit (and no swap beyond it)."""

    def __init__(self, client: Any) -> None:
        super().__init__(client)
        self.states: list[dict[str, Any]] = []  # the limited container's State as it stopped

    def run_kwargs(self, spec: ContainerSpec) -> dict[str, Any]:
        kwargs = super().run_kwargs(spec)
        if spec.name is not None and spec.name.endswith("-vllm-baseline"):
            kwargs.update(mem_limit=LIMIT, memswap_limit=LIMIT)
        return kwargs

    def start(self, spec: ContainerSpec, log_path: Path) -> Any:
        server = super().start(spec, log_path)
        if spec.name is None or not spec.name.endswith("-vllm-baseline"):
            return server
        stop = server.stop

        def record_and_stop() -> None:  # the container is removed as it stops
            server.container.reload()
            self.states.append(server.container.attrs["State"])
            stop()

        server.stop = record_and_stop  # type: ignore[method-assign]
        return server


def test_an_oom_killed_container_fails_its_configuration_and_the_matrix_goes_on(
    docker_client: Any, emulator_image: str, tmp_path: Path
) -> None:
    data: dict[str, Any] = yaml.safe_load(
        (EXPERIMENTS_DIR / "qwen38-27b-gptq-2x3090.yaml").read_text()
    )
    by_name = {c["name"]: c for c in data["configurations"]}
    data["configurations"] = [by_name["vllm-baseline"], by_name["sglang-baseline"]]
    for c in data["configurations"]:
        c["concurrency"] = [1]
    data["workload"].update(prompt_tokens=200, max_tokens=48)
    path = tmp_path / "oom.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    out = tmp_path / "out"
    launcher = MemoryLimitedLauncher(docker_client)
    opts = MatrixOptions(
        out=out,
        launcher="docker",
        emulate=True,
        emulator_image=emulator_image,
        time_scale=0.02,
        warmup=0,
        iterations=1,
        show_progress=False,
        ready_timeout_s=120,
    )
    result = run_matrix(load_experiment(path), opts, launcher=launcher, experiment_path=path)
    assert [o.status for o in result.outcomes] == ["failed", "done"], result.outcomes
    reasons = result.outcomes[0].reasons
    assert reasons[0].startswith("vllm-baseline: server exited (code 137) before it was ready")
    killed = [r for r in reasons if r.startswith("exit code 137: ")]
    assert len(killed) == 1 and "out-of-memory killer" in killed[0], reasons
    assert not any("Traceback (most recent call last)" in r for r in reasons[1:])
    # it was the kernel's OOM killer, as Docker recorded it
    assert [(s["ExitCode"], s["OOMKilled"]) for s in launcher.states] == [(137, True)]
    assert Artifacts(out).log("vllm-baseline").exists()
    # the next configuration ran: every stream answered in full (its verdict is not this
    # test's: on a loaded machine a stalled reader can see a stream in one read, invalid)
    after = read_payload(Artifacts(out).payload("sglang-baseline", 1))
    requests = [r for it in after.evidence.iterations for r in it.requests]
    assert requests and all(r.error is None and r.completion_tokens == 48 for r in requests)
    assert Artifacts(out).check_sums() == []
    assert launcher.leftovers(result.run_id) == []
