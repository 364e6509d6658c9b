"""A package's exported names, each imported from its module on first use (PEP 562): a
command's start-up pays only for the modules it touches."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def lazy_exports(
    package: str, names: Mapping[str, str], namespace: dict[str, Any]
) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: a name of ``names`` is imported from the
    module it maps to and kept in ``namespace`` (the package's globals), so it is looked up
    once; any other name is an AttributeError."""

    def getattr_(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(module), name)
        namespace[name] = value
        return value

    return getattr_
