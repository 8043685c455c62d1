"""A recording wrapper for stand-in builders (the v1 loaders' policies): once :attr:`live` is
set, every call of a stand-in module's function, construction of one of its classes, use of
one of its objects and read of ``vllm.envs`` by upstream code is recorded as
``module.name``. Enum classes are returned unwrapped (their members are compared, never
called; the order is proved by the tests that use them)."""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable
from types import ModuleType
from typing import Any

Builder = Callable[[ModuleType], None]


class Recorder:
    """Wraps stand-in builders; records what upstream touches once :attr:`live` is set."""

    def __init__(self) -> None:
        self.live = False
        self.touched: set[str] = set()

    def _note(self, what: str) -> None:
        if self.live:
            self.touched.add(what)

    def _trace(self, module: str, name: str, value: Any) -> Any:
        where = f"{module}.{name}"
        if isinstance(value, type) and issubclass(value, enum.Enum):
            return value  # members are compared, never called; the order is proved
        if isinstance(value, type):
            note = self._note

            def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
                note(where)
                value.__init__(self, *args, **kwargs)

            return type(value.__name__, (value,), {"__init__": __init__,
                                                   "__module__": value.__module__})
        if callable(value):
            @functools.wraps(value)
            def call(*args: Any, **kwargs: Any) -> Any:
                self._note(where)
                return value(*args, **kwargs)

            return call
        if isinstance(value, (bool, int, float, str, bytes, type(None), ModuleType)):
            return value
        return _Proxy(value, where, self._note)

    def wrap(self, build: Builder) -> Builder:
        def traced_build(module: ModuleType) -> None:
            build(module)
            recorder = self
            if module.__name__ == "vllm.envs":  # values, read when used: record the reads
                class Reads(ModuleType):
                    def __getattribute__(self, name: str) -> Any:
                        if not name.startswith("__"):
                            recorder._note(f"vllm.envs.{name}")
                        return ModuleType.__getattribute__(self, name)

                module.__class__ = Reads
                return
            for name, value in list(vars(module).items()):
                if not name.startswith("__"):
                    setattr(module, name, self._trace(module.__name__, name, value))
            lazy = vars(module).get("__getattr__")
            if lazy is not None:
                def __getattr__(name: str) -> Any:
                    value = recorder._trace(module.__name__, name, lazy(name))
                    setattr(module, name, value)
                    return value

                module.__getattr__ = __getattr__  # type: ignore[method-assign]

        return traced_build


class _Proxy:
    """An object stand-in (``current_platform``): each attribute use is recorded."""

    def __init__(self, inner: Any, where: str, note: Callable[[str], None]) -> None:
        self._inner, self._where, self._note = inner, where, note

    def __getattr__(self, name: str) -> Any:
        self._note(f"{self._where}.{name}")
        return getattr(self._inner, name)
