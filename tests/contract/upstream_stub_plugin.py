"""pytest plugin for the suite subprocess (``-p upstream_stub_plugin``): puts the tree under
test (``$SPECBENCH_UPSTREAM_TREE``) first on sys.path, binds the ``sglang`` package to the tree
without running its ``__init__.py`` (which pulls torch, CUDA and the whole runtime), and stubs
the GPU-only / uninstalled third-party modules SGLang imports (stubs.StubFinder, last on
sys.meta_path: every module that exists is imported for real)."""

from __future__ import annotations

import os
import sys
import types

from stubs import StubFinder
from upstream_parsers import SGLANG_STUBS

TREE = os.environ["SPECBENCH_UPSTREAM_TREE"]
sys.path.insert(0, TREE)
_sglang = types.ModuleType("sglang")
_sglang.__path__ = [os.path.join(TREE, "sglang")]
sys.modules["sglang"] = _sglang
sys.meta_path.append(StubFinder(SGLANG_STUBS))
