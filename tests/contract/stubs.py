"""Import pinned upstream packages on a CPU-only machine: any module that cannot be found
(torch, triton, transformers, GPU kernels, ...) is replaced by a permissive stub.

The stub finder sits at the END of sys.meta_path, so every real module (the extracted upstream
sources, pydantic, stdlib) is imported for real; only what is missing is faked. The parser code
we exercise (argparse definitions, dataclass fields, config classes) is the real upstream code.
"""

from __future__ import annotations

import abc
import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any


class _StubMeta(abc.ABCMeta):
    """Metaclass of stub attributes: any attribute is another stub class; usable as a base
    class, a type annotation (X | None), a decorator and a generic (X[int])."""

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _stub_class(f"{cls.__qualname__}.{name}")

    def __or__(cls, other: Any) -> Any:
        return Any

    def __ror__(cls, other: Any) -> Any:
        return Any

    def __getitem__(cls, item: Any) -> Any:
        return cls

    def __iter__(cls) -> Iterator[Any]:
        return iter(())

    def __len__(cls) -> int:
        return 0

    def __bool__(cls) -> bool:
        return False


class _StubBase(metaclass=_StubMeta):
    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__()  # msgspec.Struct-style class keywords are ignored

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._args = args

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        return core_schema.any_schema()  # a pydantic field typed with a stubbed class

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # Decorator use (@torch.no_grad()): hand the function back unchanged.
        if len(args) == 1 and not kwargs and callable(args[0]):
            return args[0]
        return _StubBase()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _stub_class(name)

    def __bool__(self) -> bool:
        return False

    def __iter__(self) -> Iterator[Any]:
        return iter(())

    def __int__(self) -> int:
        return 0

    def __index__(self) -> int:
        return 0

    def __float__(self) -> float:
        return 0.0

    def __lt__(self, other: Any) -> bool:
        return False

    __le__ = __gt__ = __ge__ = __lt__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _StubBase)  # two stubbed values (schemas, dtypes) agree

    def __hash__(self) -> int:
        return 0

    def _absorb(self, other: Any) -> Any:
        return other if isinstance(other, str) else self

    # Arithmetic on a stub value (schema strings, shapes) yields the other operand or itself.
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _absorb
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = _absorb
    __and__ = __rand__ = __or__ = __ror__ = __xor__ = __rxor__ = _absorb
    __lshift__ = __rlshift__ = __rshift__ = __rrshift__ = __pow__ = __rpow__ = _absorb


def _stub_class(name: str) -> type:
    return _StubMeta(name.rsplit(".", 1)[-1], (_StubBase,), {"__qualname__": name})


# Attributes whose mere presence upstream code reads as "this accelerator exists".
ABSENT_ATTRS: dict[str, frozenset[str]] = {
    "torch": frozenset({"npu", "hpu", "musa", "mlu"}),
}


class StubModule(types.ModuleType):
    """A module whose every attribute is a stub class (and every submodule a StubModule)."""

    __version__ = "0.0.0+stub"

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.__path__: list[str] = []  # a package: submodules resolve through the finder
        self.__file__ = f"<stub {name}>"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        if name in ABSENT_ATTRS.get(self.__name__, ()):
            raise AttributeError(name)
        value = _stub_class(f"{self.__name__}.{name}")
        setattr(self, name, value)
        return value


class _StubLoader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return StubModule(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        return None


class StubFinder(importlib.abc.MetaPathFinder):
    """Last-resort finder: stubs a module only when no other finder could import it and its
    top-level name is one of ``stub_tops`` (optional-dependency probes such as chardet or
    IPython stay ImportErrors, as upstream expects); records what it stubbed."""

    def __init__(self, stub_tops: Iterable[str]) -> None:
        self.stub_tops = frozenset(stub_tops)
        self.stubbed: list[str] = []

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname.split(".", 1)[0] not in self.stub_tops:
            return None
        self.stubbed.append(fullname)
        return importlib.machinery.ModuleSpec(fullname, _StubLoader(), is_package=True)


@contextmanager
def upstream_import_env(
    src_root: Path,
    stub_tops: Iterable[str],
    preset: dict[str, types.ModuleType] | None = None,
) -> Iterator[StubFinder]:
    """Make the package under ``src_root`` importable with missing modules stubbed; restore
    sys.modules, sys.path and sys.meta_path afterwards (so vllm and sglang never mix)."""
    saved_modules = dict(sys.modules)
    saved_path = list(sys.path)
    finder = StubFinder(stub_tops)
    sys.path.insert(0, str(src_root))
    sys.meta_path.append(finder)
    for name, module in (preset or {}).items():
        sys.modules[name] = module
    try:
        yield finder
    finally:
        sys.meta_path.remove(finder)
        sys.path[:] = saved_path
        # Drop what came from the upstream tree, the stubs and the presets; keep real
        # third-party modules imported meanwhile (C extensions such as numpy load only once).
        root = str(src_root.resolve())
        for name, module in list(sys.modules.items()):
            origin = str(getattr(module, "__file__", None) or "")
            ours = (
                isinstance(module, StubModule)
                or name in (preset or {})
                or origin.startswith(root)
                or origin.startswith("<stub ")
            )
            if ours and saved_modules.get(name) is not module:
                del sys.modules[name]
        sys.modules.update(saved_modules)
