"""``python -m bench.emulator vllm|sglang --port P [...]``: one emulated engine process.

Only the standard library's argparse here: the container has no typer.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from bench.emulator.profile import FailMode, ProfileError
from bench.emulator.runner import resolve_profile, run_process


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench.emulator",
        description="SIMULATED vLLM/SGLang-shaped server with a known schedule (never a "
        "measurement).",
    )
    parser.add_argument("engine", choices=["vllm", "sglang"])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument(
        "--profile",
        default=None,
        help="shipped profile name or YAML path (default <engine>-dflash)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--fail",
        action="append",
        default=[],
        choices=[m.value for m in FailMode],
        help="failure mode (repeatable)",
    )
    parser.add_argument("--time-scale", type=float, default=None)
    parser.add_argument("--exit-code", type=int, default=None)
    parser.add_argument("--served-model", default=None)
    parser.add_argument(
        "--max-running-requests",
        type=int,
        default=None,
        help="admission cap (the configuration's --max-num-seqs / --max-running-requests)",
    )
    parser.add_argument(
        "--tensor-parallel",
        type=int,
        default=None,
        help="ranks to log as (the experiment's tensor parallel size; default: profile's)",
    )
    parser.add_argument(
        "--spec-tokens",
        type=int,
        default=None,
        help="speculative depth (the configuration's number of draft tokens; default: profile's)",
    )
    parser.add_argument(
        "--cudagraph-metrics",
        action="store_true",
        default=None,
        help="vLLM: log the CUDA graph table every stats interval (as the real flag does)",
    )
    parser.add_argument(
        "--per-request-spec-decode-metrics",
        choices=("none", "summary", "detailed"),
        default=None,
        help="vLLM: per-request acceptance on the usage chunk (as the real flag does)",
    )
    parser.add_argument(
        "--eager",
        action="store_true",
        default=None,
        help="the configuration runs eager (the engine's eager flag): no graph is captured",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        profile = resolve_profile(
            args.engine,
            args.profile,
            fail=args.fail,
            time_scale=args.time_scale,
            exit_code=args.exit_code,
            served_model=args.served_model,
            max_running_requests=args.max_running_requests,
            spec_tokens=args.spec_tokens,
            tensor_parallel=args.tensor_parallel,
            cudagraph_metrics=args.cudagraph_metrics,
            eager=args.eager,
            per_request_spec_decode_metrics=args.per_request_spec_decode_metrics,
        )
    except (ProfileError, ValueError) as err:
        print(f"bench.emulator: error: {err}", file=sys.stderr)
        return 2
    return run_process(profile, host=args.host, port=args.port, seed=args.seed)


if __name__ == "__main__":
    sys.exit(main())
