"""A matrix stopped by SIGTERM says what it kept and how to resume, and the resume picks up
(issue 38 fault 9, issue 42 class 9); a payload edited by hand between runs is measured again,
never kept (issue 38 fault 10). The emulator as local processes, a few seconds."""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

from test_matrix_process import TIME_SCALE, small_experiment

from bench.matrix import Artifacts
from bench.matrix._resume import hold_folder
from bench.schema import read_payload


def children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def serving(pid: int, profile: str) -> list[int]:
    """The live server processes under ``pid`` started with emulator profile ``profile``."""
    out = []
    for child in children(pid):
        try:
            argv = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if profile.encode() in argv and not gone(child):
            out.append(child)
    return out


def gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


def specbench(command: str) -> list[str]:
    argv = shlex.split(command)
    assert argv[0] == "specbench", command
    return [sys.executable, "-m", "bench", *argv[1:]]


def test_sigterm_stops_the_servers_says_what_was_kept_and_resume_picks_up(tmp_path: Path) -> None:
    exp_path = small_experiment(tmp_path, {"vllm-mtp": [1], "vllm-baseline": [1, 2]})
    out = tmp_path / "out"
    arts = Artifacts(out)
    argv = ["matrix", str(exp_path), "--out", str(out), "--launcher", "process"]
    argv += ["--time-scale", TIME_SCALE, "--no-progress", "--warmup", "0", "--iterations", "1"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench", *argv],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    # the second configuration's server is up: its log appears when it starts
    while not (arts.payload("vllm-mtp", 1).exists() and arts.log("vllm-baseline").exists()):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the first configuration never finished"
        time.sleep(0.05)
    # the launcher opens the log, then starts the server: wait for that server itself (the
    # first configuration's, stopped, may not be reaped yet)
    while not (servers := serving(proc.pid, "vllm-baseline")):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no server process under the matrix"
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, (stdout, stderr)
    assert "Traceback" not in stderr
    assert f"Kept in {out}: vllm-mtp (1 payload(s))" in stderr, stderr
    assert "vllm-baseline stopped mid-way" in stderr
    resume = stderr.split("Resume with: ", 1)[1].strip()
    assert resume.endswith("--iterations 1 --resume"), resume
    # the servers were stopped, the folder released, every artifact whole and vouched for
    end = time.monotonic() + 10
    while not all(gone(p) for p in servers) and time.monotonic() < end:
        time.sleep(0.05)
    assert all(gone(p) for p in servers), [p for p in servers if not gone(p)]
    with hold_folder(out):
        pass
    status = json.loads(arts.status.read_text())["configurations"]
    assert status["vllm-mtp"]["status"] == "done"
    assert status["vllm-baseline"]["status"] == "interrupted"
    assert arts.check_sums() == []
    kept = arts.payload("vllm-mtp", 1).read_bytes()

    res = subprocess.run(specbench(resume), capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "vllm-mtp: skipped" in res.stdout and "vllm-baseline: done valid" in res.stdout
    assert arts.payload("vllm-mtp", 1).read_bytes() == kept
    assert read_payload(arts.payload("vllm-baseline", 2)).evidence.validity.valid

    # fault 10: a payload edited by hand between runs is measured again, and the run says so
    data = json.loads(kept)
    data["tokSOut"] = data["tokSOut"] * 2
    arts.payload("vllm-mtp", 1).write_text(json.dumps(data, indent=2))
    res = subprocess.run(specbench(resume), capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "vllm-mtp: done valid" in res.stdout and "vllm-baseline: skipped" in res.stdout
    assert "payloads/vllm-mtp-c1.json differs from its SHA256SUMS entry" in res.stdout
    again = read_payload(arts.payload("vllm-mtp", 1))
    assert again.tokSOut != data["tokSOut"] and again.evidence.validity.valid
    assert arts.check_sums() == []
