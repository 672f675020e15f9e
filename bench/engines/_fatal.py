"""What ended a configuration's server, named from its log: the lines an engine prints when it
dies of a known cause (CUDA out of memory, weights that are not there, a KV cache that does not
fit), quoted in the configuration's failure, and what an exit code of 137 means. A failure
message otherwise ends in the log's last lines, where a long traceback can push the one line
that says why out of sight (issue 38, fault 7)."""

from __future__ import annotations

import re

from bench.engines import LogPattern

#: the marker run_configuration writes between a resumed configuration's attempts
RESUMED = "(--resume) ---"
#: a quoted line is cut to this many characters
MAX_QUOTE = 300

FATAL_PATTERNS: tuple[LogPattern, ...] = (
    LogPattern(
        code="cuda_out_of_memory",
        regex=r"CUDA out of memory|CUDA error: out of memory|OutOfMemoryError",
        message="the GPU ran out of memory",
        source="torch.OutOfMemoryError (torch/cuda/memory.py); CUDA runtime error 2",
        severity="fatal",
    ),
    LogPattern(
        code="kv_cache_does_not_fit",
        regex=(
            r"No available memory for the cache blocks|larger than the available KV cache "
            r"memory|Not enough memory\. Please try to increase --mem-fraction-static"
        ),
        message="the KV cache does not fit in the memory left after the weights",
        source="vllm/v1/core/kv_cache_utils.py; sglang/srt/model_executor/pool_configurator.py:83",
        severity="fatal",
    ),
    LogPattern(
        code="weights_missing",
        regex=(
            r"Cannot find any model weights with|does not appear to have a file named|"
            r"No such file or directory: '[^']*\.(?:safetensors|bin|json)'|"
            r"Invalid repository ID or local directory|RepositoryNotFoundError|"
            r"LocalEntryNotFoundError"
        ),
        message="the model's weights or config are not where the server looked",
        source="vllm and sglang model_loader/loader.py (Cannot find any model weights); "
        "transformers/huggingface_hub (does not appear to have a file named)",
        severity="fatal",
    ),
)

_KILLED = re.compile(r"server exited \(code (137|-9)\)")
#: SGLang's launcher kills its own process tree with SIGKILL when a child process fails
#: (sglang/srt/utils: kill_process_tree, after "Received sigquit from a child process"): a -9
#: that is not the OOM killer (H100, 2026-12-07: a DFLASH scheduler's ValueError)
_SELF_KILLED = re.compile(r"Received sigquit from a child process|kill_process_tree called")
#: a Python exception's last line, as a traceback ends, behind a process prefix ("(EngineCore
#: pid=1) ERROR 12-07 00:21:32 [core.py:1330] ") where the engine's logger adds one
_RAISED = re.compile(
    r"^(?:\(\w+ pid=\d+\)\s*)?(?:ERROR \S+ \S+ \[[^\]]*\]\s*)?"
    r"((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception)): (\S.*)$"
)


def attempt_log(log: str) -> str:
    """The last attempt's part of a configuration's log (a resumed one keeps the earlier)."""
    return log.rsplit(RESUMED, 1)[-1]


def known_causes(message: str, log: str) -> list[str]:
    """Reason lines naming why a server died: the first line of each known fatal cause in
    ``log`` (its last attempt), quoted, and, where ``message`` says the server exited with
    code 137 (or a process launcher's -9), that SIGKILL is what the kernel's OOM killer sends,
    unless the engine's own launcher says it killed its process tree. Where no known cause
    matched, the first exception the log raised (the root cause: wrappers come after it)."""
    out: list[str] = []
    lines = attempt_log(log).splitlines()
    for pat in FATAL_PATTERNS:
        line = next((ln.strip() for ln in lines if pat.search(ln)), None)
        if line is not None:
            out.append(f"the server log names the cause: {pat.code}: {pat.message}: {_quote(line)}")
    if not out:
        raised = next((m for m in map(_RAISED.match, lines) if m is not None), None)
        if raised is not None:
            line = f"{raised.group(1)}: {raised.group(2).strip()}"
            out.append(f"the server raised, first in its log: {_quote(line)}")
    killed = _KILLED.search(message)
    if killed is not None and any(_SELF_KILLED.search(ln) for ln in lines):
        out.append(
            f"exit code {killed.group(1)}: the engine's launcher killed its own processes with "
            "SIGKILL after a child process failed (its log: 'Received sigquit from a child "
            "process', kill_process_tree), not the out-of-memory killer"
        )
    elif killed is not None:
        out.append(
            f"exit code {killed.group(1)}: the server was killed with SIGKILL, which is what the "
            "kernel's out-of-memory killer sends (a container's memory limit, or the host's "
            "memory), unless someone ran docker kill or kill -9"
        )
    return out


def _quote(line: str) -> str:
    return repr(line if len(line) <= MAX_QUOTE else line[: MAX_QUOTE - 3] + "...")
