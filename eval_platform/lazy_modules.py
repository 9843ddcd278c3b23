"""Heavy modules imported on first use, so that loading the code location stays fast.

`scipy.stats` alone takes longer to import than the rest of the definitions; the statistics need it only
when an asset runs. `lazy("scipy.stats")` is a stand-in whose attributes import the module on first access.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class _LazyModule:
    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        module: ModuleType = importlib.import_module(self._name)
        return getattr(module, attribute)

    def __repr__(self) -> str:
        return f"<lazy module {self._name}>"


def lazy(name: str) -> Any:
    """A stand-in for module `name`, imported when one of its attributes is first used."""
    return _LazyModule(name)
