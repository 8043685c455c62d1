"""atheris, when it is installed: coverage instrumentation of the model and the target.

atheris is optional (a pip extra with wheels for CPython 3.11-3.13 on Linux x86_64); without
it these helpers do nothing and the harnesses still import, so pytest and the built-in engine
work everywhere.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
from collections.abc import Iterable
from types import ModuleType
from typing import Any

#: Packages whose code guides coverage: the model and the bundled target.
INSTRUMENTED = ("models", "prefixcache")


def atheris_module() -> ModuleType | None:
    """The atheris module, or None when it is not installed."""
    if importlib.util.find_spec("atheris") is None:
        return None
    return importlib.import_module("atheris")


def instrumented(enabled: bool,
                 extra: Iterable[str] = ()) -> contextlib.AbstractContextManager[Any]:
    """``atheris.instrument_imports`` for the model, the bundled target and ``extra``
    packages when ``enabled`` and atheris is installed; otherwise a no-op context."""
    atheris = atheris_module() if enabled else None
    if atheris is None:
        return contextlib.nullcontext()
    include = sorted({*INSTRUMENTED, *extra})
    manager: contextlib.AbstractContextManager[Any] = atheris.instrument_imports(include=include)
    return manager
