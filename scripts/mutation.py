"""Mutation score of the rules that decide a run (`make mutation`, docs/MUTATION.md).

Runs mutmut (configured in pyproject.toml, [tool.mutmut]) over the modules below, then prints
killed / total per module (a timeout counts as killed) and every mutant that was not. Exit 1
when a module is under the goal. The client is scoped to its timing path: the functions that
stamp arrival times and turn them into TTFT and decode rate; the rest of it (connection set-up,
URL parsing, the request body) decides no figure.

    python scripts/mutation.py            # run, then score
    python scripts/mutation.py --score    # score the last run only
    python scripts/mutation.py --only stats acceptance
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from fnmatch import fnmatch
from pathlib import Path

GOAL = 0.90
# A mutant whose tests hang until mutmut stops them (an endless loop) was detected too.
DETECTED = ("killed", "timeout")
BIN = Path(sys.executable).parent

# module label -> mutmut name globs (mutmut names a method's mutants x<sep>Class<sep>method__...)
SCOPE: dict[str, tuple[str, ...]] = {
    "stats": ("bench.core._stats.*",),
    "acceptance": ("bench.measure._acceptance.*",),
    "validity": ("bench.measure._validity.*",),
    "claims": ("bench.report._claims.*",),
    "depth": ("bench.report._depth.*",),
    "client timing": tuple(
        f"bench.measure._client.*{name}__mutmut_*"
        for name in (
            "_Protocolǁdata_received",
            "_Protocolǁ_feed_plain",
            "_Protocolǁ_feed_chunked",
            "_Protocolǁ_body",
            "Connectionǁsend",
            "x_interpret_chat_stream",
        )
    ),
}


def _mutmut(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "mutmut"), *args], check=False, text=True, capture_output=args[0] == "results"
    )


def run(labels: list[str]) -> int:
    globs = [g for label in labels for g in SCOPE[label]]
    jobs = os.environ.get("MUTATION_JOBS", "1")
    return _mutmut("run", "--max-children", jobs, *globs).returncode


def score(labels: list[str]) -> int:
    out = _mutmut("results", "--all", "true").stdout
    status: dict[str, str] = {}
    for line in out.splitlines():
        name, sep, what = line.strip().rpartition(": ")
        if sep:
            status[name] = what
    failed = False
    for label in labels:
        names = sorted(n for n in status if any(fnmatch(n, g) for g in SCOPE[label]))
        killed = sum(status[n] in DETECTED for n in names)
        total = len(names)
        ratio = killed / total if total else 0.0
        failed |= ratio < GOAL
        print(f"{label:14} {killed:4} / {total:4} killed  {100 * ratio:5.1f} %")
        for n in names:
            if status[n] not in DETECTED:
                print(f"    {status[n]:12} {n}")
    return 1 if failed else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--score", action="store_true", help="score the last run, do not run")
    ap.add_argument("--only", nargs="+", choices=sorted(SCOPE), default=list(SCOPE))
    args = ap.parse_args()
    start = time.monotonic()
    if not args.score and run(args.only) != 0:
        return 2
    rc = score(args.only)
    if not args.score:
        print(f"mutation run took {time.monotonic() - start:.0f} s")
    return rc


if __name__ == "__main__":
    sys.exit(main())
