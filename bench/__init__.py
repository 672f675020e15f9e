"""specbench: reproducible speculative-decoding benchmarks of LLM serving engines.

The package is named ``bench``; the distribution and the CLI are ``specbench``.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
