"""``python -m bench.emulator vllm|sglang --port P [...]``: one emulated engine process.

Only the standard library's argparse here: the container has no typer.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from bench.emulator.profile import FailMode, ProfileError, Verification
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
        "--speculative-config",
        default=None,
        help="vLLM: the server's --speculative-config JSON; its rejection_sample_method "
        "(synthetic, fly) and num_speculative_tokens_per_batch_size are emulated",
    )
    parser.add_argument(
        "--speculative-adaptive",
        action="store_true",
        default=False,
        help="SGLang: adaptive speculative depth (as the real flag asks)",
    )
    parser.add_argument(
        "--eager",
        action="store_true",
        default=None,
        help="the configuration runs eager (the engine's eager flag): no graph is captured",
    )
    return parser


#: SGLang 0.5.19's simulated acceptance length (srt/environ.py:503), read from the environment
#: as the real server reads it
SIMULATE_ACC_LEN_ENV = "SGLANG_SIMULATE_ACC_LEN"
#: vLLM 0.33.0 --speculative-config key of the per-batch-size depth schedule
PER_BATCH_K = "num_speculative_tokens_per_batch_size"


def verification(args: argparse.Namespace) -> Verification:
    """How the emulated server verifies drafts: vLLM's --speculative-config keys, SGLang's
    SGLANG_SIMULATE_ACC_LEN (environment) and --speculative-adaptive. ValueError on a bad one."""
    if args.engine == "sglang":
        raw = os.environ.get(SIMULATE_ACC_LEN_ENV, "").strip()
        length = float(raw) if raw else -1.0
        return Verification(
            simulate_acc_len=length if length > 0 else None, adaptive=args.speculative_adaptive
        )
    if not args.speculative_config:
        return Verification()
    spec = json.loads(args.speculative_config)
    if not isinstance(spec, dict):
        raise ValueError("--speculative-config must be a JSON object")
    return Verification(
        method=spec.get("rejection_sample_method", "standard"),
        synthetic_rates=tuple(spec.get("synthetic_acceptance_rates") or ()),
        per_batch_k=tuple(
            tuple(e) for e in spec.get("num_speculative_tokens_per_batch_size") or ()
        ),
        spec_config=spec,
    )


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
            verification=verification(args),
        )
    except (ProfileError, ValueError) as err:
        print(f"bench.emulator: error: {err}", file=sys.stderr)
        return 2
    return run_process(profile, host=args.host, port=args.port, seed=args.seed)


if __name__ == "__main__":
    sys.exit(main())
