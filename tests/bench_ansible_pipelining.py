"""Benchmark (figures, not pass/fail): what Ansible pipelining saves on the Docker connection
that stands in for the user's SSH in the fresh-host and fleet tests (issue 50).

    .venv/bin/python tests/bench_ansible_pipelining.py [--runs 2]

Needs Docker and specbench/base:bookworm (docker/base/build.sh). One fresh target
(tests/e2e/test_ansible_fresh_host.py's Target) gets a first preflight+prerequisites run; then
the same idempotent run, alternately without and with ANSIBLE_PIPELINING, each printed with
its wall time, the controller's CPU (this process and its children) and the whole machine's
busy CPU from /proc/stat (the target's processes and dockerd included). 2026-12-07, 2 cores,
quiet (docs/benchmarks.md): 18.1 and 19.3 CPU-seconds of the machine without, 12.9 and 12.9
with; wall 17.4/18.4 s vs 12.5/12.3 s.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "e2e"))
import test_ansible_fresh_host as fresh


def controller_cpu() -> float:
    own, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def machine_busy() -> float:
    """Busy CPU-seconds of the whole machine so far (every field but idle and iowait)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2, help="idempotent runs in each mode")
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as tmp:
        target = fresh.Target(Path(tmp))
        try:
            extravars = fresh._base_vars(target, Path(tmp))
            first = target.run("first", "preflight,prerequisites", extravars)
            print(f"first run: rc {first.rc}")
            for k in range(2 * runs):
                pipelined = k % 2 == 1
                cpu, busy, wall = controller_cpu(), machine_busy(), time.monotonic()
                r = target.run(
                    f"again-{k}", "preflight,prerequisites", extravars, pipelined=pipelined
                )
                print(
                    f"{'pipelined' if pipelined else 'plain':>9}: rc {r.rc}, wall "
                    f"{time.monotonic() - wall:5.1f} s, controller CPU "
                    f"{controller_cpu() - cpu:5.1f} s, machine busy {machine_busy() - busy:5.1f} s"
                )
        finally:
            target.remove()
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
