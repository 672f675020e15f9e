"""A fork server for the command line's bad-input cases (test_cli_errors.py).

    python tests/integration/cli_forkserver.py      (JSON lines in on stdin, out on stdout)

One interpreter imports ``bench.cli`` and every command group once; each request
``{"argv": [...], "cwd": "...", "timeout": s}`` is then run in a child forked from it, as
``python -m bench ARGV`` runs it (``bench.cli.main``; SystemExit's code is the child's exit
code), its stdout and stderr to files, its stdin /dev/null, killed by SIGALRM past ``timeout``.
The answer is ``{"returncode": n, "stdout": "...", "stderr": "..."}`` (a negative code: the
signal that ended the child). A fresh interpreter a case spent ~0.8 s of CPU importing what
every case imports; 87 cases ran ~70 CPU-seconds of the parallel phase's imports (issue 50).
test_cli_errors.py runs a sample of the cases through real interpreters as well and asks for
the same answers.

The server is single-threaded, so forking it is safe; every child starts from the same
imported state, and nothing one case does reaches the next.
"""

from __future__ import annotations

import atexit
import importlib
import json
import os
import signal
import sys
import tempfile
import traceback
from typing import Any


def _child(argv: list[str], cwd: str, timeout: int, out: int, err: int) -> int:
    from bench.cli import main

    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(err, 2)
    signal.alarm(timeout)
    code = 0
    try:
        os.chdir(cwd)
        main(argv)
    except SystemExit as exc:
        # as the interpreter exits on it: None is 0, an int itself, anything else printed, 1
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    atexit._run_exitfuncs()  # as the interpreter does on its way out
    sys.stdout.flush()
    sys.stderr.flush()
    return code


def _run(request: dict[str, Any]) -> dict[str, Any]:
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        pid = os.fork()
        if pid == 0:  # pragma: no cover (the child)
            code = 1
            try:
                code = _child(
                    request["argv"], request["cwd"], request["timeout"], out.fileno(), err.fileno()
                )
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        out.seek(0)
        err.seek(0)
        return {
            "returncode": os.waitstatus_to_exitcode(status),
            "stdout": out.read().decode(errors="replace"),
            "stderr": err.read().decode(errors="replace"),
        }


def serve() -> None:
    from bench.cli import COMMAND_MODULES

    for group in sorted(set(COMMAND_MODULES.values())):
        importlib.import_module(f"bench.commands.{group}")
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # nothing the server prints can corrupt the answers
    answers.write(json.dumps({"ready": True}) + "\n")
    answers.flush()
    for line in sys.stdin:
        answers.write(json.dumps(_run(json.loads(line))) + "\n")
        answers.flush()


if __name__ == "__main__":
    serve()
