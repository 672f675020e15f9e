"""Answers known in advance for the real-engine tiers, one place for each.

The target as its own draft: the draft pass and the verify pass run the same weights on the same
tokens, so in exact arithmetic every draft token is accepted.
- CPU (vLLM's CPU build, fp32/bf16 kernels with a fixed reduction order for one request): the
  two passes compute the same logits bit for bit, so acceptance is exactly 1.0 and the mean
  acceptance length exactly k+1 (tests/engine/test_matrix_vllm_cpu.py). That holds at
  concurrency 1 on every CPU, and above it on CPUs without AMX. On a CPU with AMX tiles (the
  server logs its CPU flags: ``amx_bf16``), a batch of several requests takes a GEMM path whose
  blocking depends on the batch's rows, so, as on a GPU, a near-tie can round differently in
  the draft and the verify pass: seen on an AMX Xeon (2026-12-06), self-draft k=1 at c=2
  accepted 127 of 128 in one window, and one greedy output at c=2 parted from the baseline at
  token 12 (the same token and text for two speculative configurations, so the baseline's
  batch moved). There the GPU's floor applies to a configuration's windows pooled, and a
  divergence at c>1 stays unclassified (the CPU build serves no logprobs to classify it).
- GPU (vLLM 0.26.0 on an H200, bf16): the draft pass decodes 1 token per step and the verify
  pass scores k+1 tokens per step, and the GPU kernels (FlashAttention 3, cuBLAS GEMMs whose
  split and tile choice depend on the batch shape, CUDA graphs padded to a capture size) reduce
  in a shape-dependent order. bf16 keeps 8 bits of mantissa, so a near-tie between the top two
  logits of a random-weight model can round differently in the two passes and the verifier
  rejects that draft token. The GPU oracle is therefore a floor, 0.98, not 1.0, and it holds
  for a configuration's measured windows pooled, not for each window: a window of 16 drafts of
  3 tokens that loses one token is 47/48 = 0.979 (tests/contract/test_vllm_gpu_recordings.py
  checks the recorded H200 run; the issue's hand run gave 0.9945).
"""

from __future__ import annotations

from typing import Final

from bench.schema import Payload

#: minimum acceptance rate of the target drafting for itself, by the server's backend
SELF_DRAFT_MIN_ACCEPTANCE: Final = {"cpu": 1.0, "cuda": 0.98}


def cpu_batch_exact(concurrency: int, cpu_flags: list[str]) -> bool:
    """Whether the CPU build's draft and verify passes agree bit for bit at this concurrency,
    given the CPU flags the server logged (exact at c=1 everywhere; above it, not with AMX)."""
    return concurrency == 1 or "amx_bf16" not in cpu_flags


#: the reason the client gives a stream whose every token arrived in one read
#: (bench/measure/_client.py: its decode rate is undefined, the request invalid)
ONE_READ: Final = "all tokens arrived in one chunk: decode rate undefined"


def spoiled_only_by_load(p: Payload) -> bool:
    """Whether ``p`` is invalid for one cause alone: streams that reached the client whole, in
    one read, each with its token chunks stamped alike (the evidence agrees). A sound server and
    client give that when the measuring process stalls for a whole stream, as a loaded machine's
    can for a stream of tens of milliseconds: the client is right to call the request invalid,
    and a test about anything else must not fail on it. Every other cause still counts; a
    warning beside it (the CPU build's eager run: ``cuda_graphs_not_captured``) invalidates
    nothing and is not a cause."""
    if p.evidence.validity.valid:
        return False
    reasons = [r for r in p.evidence.validity.reasons if r.severity == "invalid"]
    if not reasons or any(
        r.code not in ("invalid_iteration", "no_valid_iteration") for r in reasons
    ):
        return False
    spoiled = [
        r for it in p.evidence.iterations if not it.valid for r in it.requests if not r.valid
    ]
    for r in spoiled:
        stamps = {t for t, n in zip(r.chunk_times, r.chunk_chars, strict=True) if n}
        if r.error is not None or r.reasons != [ONE_READ] or len(stamps) != 1:
            return False
    return bool(spoiled)
