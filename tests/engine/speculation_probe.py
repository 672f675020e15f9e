"""Run inside the vLLM CPU image (test_speculation_cpu_build.py): what its build does with
issue 48's knobs, without a server. Prints one JSON line: the rejection methods its
SpeculativeConfig takes, the rates it resolves a synthetic length of 2.5 over k=3 to, whether it
has the per-batch-size depth schedule, and what each CPU rejection kernel says when asked for
synthetic acceptance."""

import json
import typing

import vllm.config.speculative as s
from vllm.utils import cpu_triton_utils as c

config = s.SpeculativeConfig
out = {
    "methods": list(typing.get_args(s.RejectionSampleMethod)),
    "rates": config._resolve_synthetic_acceptance_rates(3, None, 2.5),
    "per_batch_k": "num_speculative_tokens_per_batch_size" in config.__dataclass_fields__,
}
for name in ("_rejection_greedy_sample_kernel_impl", "_rejection_random_sample_kernel_impl"):
    kernel = getattr(c, name)
    try:  # the assertion is the kernel's first statement: no tensor is touched before it
        kernel(*([None] * (kernel.__code__.co_argcount - 1)), SYNTHETIC_MODE=True)
    except AssertionError as err:
        out[name] = str(err)
print(json.dumps(out))
