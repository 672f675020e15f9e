"""Bad input to every ``specbench`` sub-command, each in a process of its own: exit code 2 (1
only where a command's contract says a run/validation failed), one line naming the field and
the reason (or typer's own usage error), and never a traceback. The processes are forked from
one that imported the command line once (cli_forkserver.py); a sample of the cases runs
through ``python -m bench`` as well, with the same answers."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

from bench.cli import main

REPO = Path(__file__).resolve().parents[2]
FORKSERVER = Path(__file__).with_name("cli_forkserver.py")
EXP = str(REPO / "bench/experiments/qwen38-27b-gptq-2x3090.yaml")
NVML_DUMP = str(REPO / "tests/fixtures/hardware/h200-nvml-dump.json")
HARDWARE = REPO / "tests/fixtures/hardware/h200-hardware.json"
USAGE = "usage"  # typer/click's own usage error (missing option, unknown flag, bad type)


class Case(NamedTuple):
    argv: str  # split on spaces; {port} is a closed port on 127.0.0.1
    code: int
    expect: str  # the field named on the error line, or USAGE


def _run(*extra: str) -> str:
    base = (
        "run vllm --base-url http://127.0.0.1:{port} --hf-id Qwen/X --served-model x "
        "--quantization q --hardware hw.json --prompt-tokens 16 --max-tokens 8 --out o/p.json "
        "--no-telemetry --request-timeout 2"
    )
    return " ".join((base, *extra))


CASES = [
    # top level
    Case("nosuchcommand", 2, USAGE),
    Case("version extra", 2, USAGE),
    # run: missing options, wrong types, bad enums, bad numbers, bad files, unreachable server
    Case("run", 2, USAGE),
    Case(_run("--prompt-tokens abc"), 2, USAGE),
    Case(_run().replace("run vllm", "run bogus"), 2, USAGE),
    Case(_run("--mode local"), 2, USAGE),
    Case(_run("--spec-method foo"), 2, "--spec-method"),
    Case(_run("--spec-method dflash"), 2, "--spec-num-tokens"),
    Case(_run("--concurrency 0"), 2, "--concurrency"),
    Case(_run("--warmup -1"), 2, "--warmup"),
    Case(_run("--request-timeout 0"), 2, USAGE),  # typer's error naming the option (issue 42)
    Case(_run("--temperature -1"), 2, USAGE),
    Case(_run("--temperature inf"), 2, USAGE),  # was blamed on --base-url
    Case(_run("--logprob-probes 9"), 2, "--logprob-probes"),
    Case(_run("--logprob-probes -1"), 2, "--logprob-probes"),
    Case(_run("--hardware missing.json"), 2, "--hardware missing.json"),
    Case(_run("--hardware bad.json"), 2, "--hardware bad.json"),
    Case(_run("--hardware wrong.json"), 2, "--hardware wrong.json"),
    Case(_run("--tokenizer missing"), 2, "--tokenizer"),
    Case(_run("--out afile/p.json"), 2, "--out"),
    Case(_run("--out adir"), 2, "--out"),
    Case(_run("--base-url notaurl"), 2, "--base-url"),
    Case(_run(), 2, "--base-url"),  # nothing listens there
    # validate: unreadable input is bad input; a readable but broken payload is a failure (1)
    Case("validate missing.json", 2, USAGE),
    Case("validate adir", 2, USAGE),
    # schema
    Case("schema nope", 2, USAGE),
    # emulate
    Case("emulate vllm", 2, USAGE),
    Case("emulate bogus --port 1", 2, "engine"),
    Case("emulate vllm --port -1", 2, USAGE),
    Case("emulate vllm --port 1 --fail nope", 2, "--fail"),
    Case("emulate vllm --port 1 --profile nope", 2, "--profile"),
    Case("emulate vllm --port 1 --profile bad.yaml", 2, "--profile"),
    Case("emulate sglang --port 1 --profile vllm-mtp", 2, "--profile"),
    Case("emulate vllm --port 1 --time-scale 0", 2, USAGE),
    Case("emulate vllm --port 1 --max-running-requests 0", 2, "emulate: max_running_requests"),
    Case("emulate vllm --port 0 --host 256.1.1.1", 2, "--host/--port"),
    # plan / preflight: the experiment file
    Case("plan missing.yaml", 2, "missing.yaml"),
    Case("plan bad.yaml", 2, "bad.yaml"),
    Case("plan list.yaml", 2, "list.yaml"),
    Case("plan wrongtype.yaml", 2, "wrongtype.yaml: schema"),
    Case("plan {exp} --only nope", 2, "--only"),
    Case("preflight {exp}", 2, USAGE),
    Case("preflight missing.yaml --models-dir adir", 2, "missing.yaml"),
    Case("preflight {exp} --models-dir missing", 2, "missing"),
    # matrix / demo
    Case("matrix {exp}", 2, USAGE),
    Case("matrix missing.yaml --out m", 2, "missing.yaml"),
    Case("matrix {exp} --out m --launcher bogus", 2, "--launcher"),
    Case("matrix {exp} --out m --only nope --launcher process", 2, "--only"),
    Case("matrix {exp} --out m --launcher process --iterations 0", 2, USAGE),
    Case("matrix {exp} --out m --launcher process --time-scale -1", 2, USAGE),
    Case("matrix {exp} --out m --launcher process --time-scale inf", 2, USAGE),  # hung
    Case("matrix {exp} --out afile/m --launcher process", 2, "--out"),
    Case("demo --time-scale 0", 2, USAGE),
    Case("demo --time-scale nan", 2, USAGE),  # hung
    Case("demo --out afile/demo", 2, "--out"),
    # report / publish / verify-bundle
    Case("report missing", 2, "missing"),
    Case("report adir", 2, "adir"),
    Case("report art --out afile/r", 2, "--out"),
    Case("report art --reference missing --out r", 2, "--reference"),
    Case("report art --reference art --out r", 2, "art"),
    Case("publish missing --out b", 2, "missing"),
    Case("publish art --out afile/b", 2, "--out"),
    Case("publish art --out afile", 2, "--out"),
    Case("verify-bundle missing", 2, "missing"),
    Case("verify-bundle afile", 2, "afile"),
    Case("verify-bundle adir", 1, "FAIL SHA256SUMS missing"),  # contract: exit 1, a problem
    # compare / tiny-model
    Case("compare art --out c", 2, "RUN_DIR"),
    Case("compare art missing --out c", 2, "missing"),
    Case("compare art art2 --out afile/c", 2, "--out"),
    Case("compare art art --out c", 2, "art: the same run folder as art"),
    Case("tiny-model", 2, USAGE),
    Case("tiny-model afile", 2, "OUT"),
    # hardware / provenance / probe / telemetry-sample / roofline
    Case("hardware --from-dump missing.json", 2, "missing.json"),
    Case("hardware --from-dump bad.json", 2, "bad.json"),
    Case("hardware --from-dump {dump} --out afile/hw.json", 2, "--out"),
    Case("hardware --from-dump {dump} --out adir", 2, "--out"),
    Case("provenance --experiment missing.yaml", 2, "missing.yaml"),
    Case("provenance --hardware bad.json", 2, "--hardware bad.json"),
    Case("provenance --out afile/p.json", 2, "--out"),
    Case("probe nope", 2, USAGE),
    Case("probe bandwidth --size-mib 0", 2, USAGE),
    Case("telemetry-sample --seconds 0", 2, USAGE),
    Case("roofline", 2, USAGE),
    Case("roofline --weights-gb 10", 2, "roofline"),
    Case("roofline --weights-gb 10 --bandwidth-gbs 0", 2, USAGE),
    Case("roofline --weights-gb inf --bandwidth-gbs 900", 2, USAGE),  # was an internal error
    Case("roofline --weights-gb 10 --bandwidth-gbs 900 --cards 0", 2, USAGE),
    Case("roofline --weights-gb 10 --bandwidth-gbs 900 --context -1", 2, USAGE),
    Case("roofline --weights-gb 10 --bandwidth-gbs 900 --measured -1", 2, USAGE),
    Case("roofline --weights-gb 10 --hardware bad.json", 2, "--hardware bad.json"),
    Case("roofline --weights-gb 10 --hardware wrong.json", 2, "--hardware wrong.json: hwClass"),
]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Bad inputs of every kind, next to two valid artifacts folders (``art``, ``art2``)."""
    from report_factory import seed_matrix, write_artifacts

    d = tmp_path_factory.mktemp("cli-errors")
    (d / "adir").mkdir()
    (d / "afile").write_text("a regular file\n")
    (d / "bad.json").write_text("{not json\n")
    (d / "wrong.json").write_text('{"x": 1}\n')
    (d / "bad.yaml").write_text("a: [1,\n")
    (d / "list.yaml").write_text("[]\n")
    (d / "wrongtype.yaml").write_text("name: 3\n")
    shutil.copy(HARDWARE, d / "hw.json")
    write_artifacts(d / "art", seed_matrix(simulated=False, sweep=False))
    write_artifacts(d / "art2", seed_matrix(simulated=False, sweep=False))
    return d


#: the cases run through a real interpreter too (``python -m bench``): every eighth
SAMPLE = CASES[::8]


class Answers:
    """Each case's answer from the fork server (cli_forkserver.py), and a real interpreter's
    for the SAMPLE."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = closed_port()
        self.env = {**os.environ, "SPECBENCH_DEBUG": "", "COLUMNS": "200"}

    def argv(self, case: Case) -> list[str]:
        return case.argv.format(exp=EXP, dump=NVML_DUMP, port=self.port).split()

    def forked(self) -> dict[str, subprocess.CompletedProcess[str]]:
        with subprocess.Popen(
            [sys.executable, str(FORKSERVER)], cwd=REPO, env=self.env, text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        ) as server:  # fmt: skip
            assert server.stdin is not None and server.stdout is not None
            assert json.loads(server.stdout.readline()) == {"ready": True}
            out = {}
            for case in CASES:
                request = {"argv": self.argv(case), "cwd": str(self.workdir), "timeout": 60}
                server.stdin.write(json.dumps(request) + "\n")
                server.stdin.flush()
                a = json.loads(server.stdout.readline())
                out[case.argv] = subprocess.CompletedProcess(
                    self.argv(case), a["returncode"], a["stdout"], a["stderr"]
                )
            server.stdin.close()
            assert server.wait(timeout=30) == 0
            return out

    def real(self, case: Case) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "bench", *self.argv(case)],
            cwd=self.workdir, env=self.env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip


@pytest.fixture(scope="module")
def answers(workdir: Path) -> Answers:
    return Answers(workdir)


@pytest.fixture(scope="module")
def results(answers: Answers) -> dict[str, subprocess.CompletedProcess[str]]:
    """Every case's answer, from the fork server (one import of the command line for all)."""
    return answers.forked()


def test_the_fork_server_answers_as_a_real_interpreter(
    answers: Answers, results: dict[str, subprocess.CompletedProcess[str]]
) -> None:
    """The SAMPLE through ``python -m bench`` itself: the same exit code, stdout and stderr as
    the fork server gave (so the other cases' answers are the command line's own)."""
    for case in SAMPLE:
        real, forked = answers.real(case), results[case.argv]
        assert (real.returncode, real.stdout, real.stderr) == (
            forked.returncode,
            forked.stdout,
            forked.stderr,
        ), case.argv


@pytest.mark.parametrize("case", CASES, ids=[c.argv[:70] for c in CASES])
def test_bad_input(case: Case, results: dict[str, subprocess.CompletedProcess[str]]) -> None:
    res = results[case.argv]
    both = res.stdout + res.stderr
    assert "Traceback" not in both, both
    assert res.returncode == case.code, both
    if case.expect == USAGE:
        assert "Usage: specbench" in res.stderr, res.stderr
        return
    if case.code == 1:
        assert case.expect in res.stdout, both
        return
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr  # one line, nothing else on stderr
    assert lines[0].startswith(f"specbench: error: {case.expect}"), lines[0]
    reason = lines[0].removeprefix(f"specbench: error: {case.expect}").lstrip(":").strip()
    assert reason, lines[0]  # a reason follows the field


def test_failed_run_writes_nothing(
    workdir: Path, results: dict[str, subprocess.CompletedProcess[str]]
) -> None:
    """Bad input leaves no half-written output behind."""
    for leftover in ("o/p.json", "m", "r", "b", "afile/b"):
        assert not (workdir / leftover).exists(), leftover
    assert (workdir / "afile").read_text() == "a regular file\n"


def _boom(*args: object, **kwargs: object) -> None:
    raise RuntimeError("unexpected\nsecond line")


def test_internal_error_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("bench.commands.hardware.ceiling", _boom)
    monkeypatch.delenv("SPECBENCH_DEBUG", raising=False)
    with pytest.raises(SystemExit) as exc:
        main(["roofline", "--weights-gb", "1", "--bandwidth-gbs", "1"])
    assert exc.value.code == 1
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "specbench: internal error: RuntimeError: unexpected second line "
        "(re-run with SPECBENCH_DEBUG=1 for the traceback)"
    ]
    monkeypatch.setenv("SPECBENCH_DEBUG", "1")
    with pytest.raises(RuntimeError, match="unexpected"):
        main(["roofline", "--weights-gb", "1", "--bandwidth-gbs", "1"])


def test_matrix_without_a_docker_engine_names_it_and_writes_nothing(tmp_path: Path) -> None:
    # was "internal error: DockerException", after the lock, hardware and provenance were written
    env = {**os.environ, "SPECBENCH_DEBUG": "", "DOCKER_HOST": f"unix://{tmp_path}/none.sock"}
    out = tmp_path / "out"
    res = subprocess.run(
        [sys.executable, "-m", "bench", "matrix", EXP, "--out", str(out), "--emulate",
         "--no-progress"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr
    assert res.stderr.startswith("specbench: error: --launcher: docker: the Docker engine")
    assert "--launcher process" in res.stderr
    assert not out.exists()
