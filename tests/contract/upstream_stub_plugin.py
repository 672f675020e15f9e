"""pytest plugin for the suite subprocess (``-p upstream_stub_plugin``): puts the tree under
test (``$SPECBENCH_UPSTREAM_TREE``) first on sys.path and stubs the GPU-only / uninstalled
third-party modules SGLang imports (stubs.StubFinder, last on sys.meta_path: every module that
exists is imported for real)."""

from __future__ import annotations

import os
import sys

from stubs import StubFinder
from upstream_parsers import SGLANG_STUBS

TREE = os.environ["SPECBENCH_UPSTREAM_TREE"]
sys.path.insert(0, TREE)
sys.meta_path.append(StubFinder(SGLANG_STUBS))
