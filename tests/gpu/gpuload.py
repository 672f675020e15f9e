"""A synthetic GPU load for the GPU-only tests and the fixture recording: bf16 matrix products
through torch for a given time. Not a test; imported by them."""

from __future__ import annotations

import time
from typing import Any


def matmul_load(seconds: float, size: int = 8192, device: int = 0) -> dict[str, Any]:
    """Run back-to-back bf16 matmuls for ``seconds``; returns the count and the TFLOP/s seen."""
    import torch

    dev = torch.device("cuda", device)
    a = torch.randn(size, size, device=dev, dtype=torch.bfloat16)
    b = torch.randn(size, size, device=dev, dtype=torch.bfloat16)
    torch.cuda.synchronize(dev)
    n = 0
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        for _ in range(10):
            a @ b
        torch.cuda.synchronize(dev)
        n += 10
    took = time.monotonic() - t0
    del a, b
    torch.cuda.empty_cache()
    return {"matmuls": n, "seconds": took, "tflops": 2 * size**3 * n / took / 1e12}
