"""Answers known in advance for the real-engine tiers, one place for each.

The target as its own draft: the draft pass and the verify pass run the same weights on the same
tokens, so in exact arithmetic every draft token is accepted.
- CPU (vLLM's CPU build, fp32/bf16 kernels with a fixed reduction order for one request): the
  two passes compute the same logits bit for bit, so acceptance is exactly 1.0 and the mean
  acceptance length exactly k+1 (tests/engine/test_matrix_vllm_cpu.py).
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

#: minimum acceptance rate of the target drafting for itself, by the server's backend
SELF_DRAFT_MIN_ACCEPTANCE: Final = {"cpu": 1.0, "cuda": 0.98}
