"""Stand-ins for the few names outside ``vllm/v1/kv_offload`` that the offload modules import.

Each one replaces a module the CPU manager's import closure names but whose behaviour the
manager never observes; why each cannot change an observed result is stated beside it. Nothing
here is upstream text: every stand-in is written from what the offload modules use.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any, NewType

__all__ = [
    "CORE_STUBS",
    "LEGACY_STUBS",
    "NUMPY_STUB",
    "TYPING_EXTENSIONS_STUB",
]


def _torch(module: ModuleType) -> None:
    """``torch``: ``kv_offload/base.py`` names ``torch.Tensor`` once, as the field annotation of
    ``CanonicalKVCacheTensor`` (a worker-side record the scheduler's manager never builds). A
    class is all a dataclass annotation needs; no manager code path touches a tensor."""
    vars(module)["Tensor"] = type("Tensor", (), {"__module__": "torch"})


class _Logger(logging.LoggerAdapter):  # type: ignore[type-arg]
    """A standard logger with vLLM's ``*_once`` helpers (log once per distinct message)."""

    def __init__(self, name: str) -> None:
        super().__init__(logging.getLogger(name), {})
        self._seen: set[tuple[str, str]] = set()

    def _once(self, level: str, msg: str, *args: object) -> None:
        if (level, msg) not in self._seen:
            self._seen.add((level, msg))
            getattr(self, level)(msg, *args)

    def info_once(self, msg: str, *args: object, **_: object) -> None:
        self._once("info", msg, *args)

    def warning_once(self, msg: str, *args: object, **_: object) -> None:
        self._once("warning", msg, *args)

    def debug_once(self, msg: str, *args: object, **_: object) -> None:
        self._once("debug", msg, *args)


def _logger(module: ModuleType) -> None:
    """``vllm.logger``: the policy factory logs only when loading an out-of-tree policy by
    module path; logging has no effect on the manager's state or results. (The real module
    pulls in ``vllm.envs`` and the engine's logging configuration.)"""
    vars(module)["init_logger"] = _Logger


class _Stats:
    """Records what ``get_stats`` reports (gauges, histogram samples, counters) in dicts."""

    def __init__(self) -> None:
        self.gauges: dict[str, float] = {}
        self.histograms: dict[str, list[float]] = {}
        self.counters: dict[str, float] = {}

    def set_gauge(self, name: str, value: float) -> None:
        self.gauges[name] = value

    def observe_histogram(self, name: str, value: float) -> None:
        self.histograms.setdefault(name, []).append(value)

    def increase_counter(self, name: str, value: float) -> None:
        self.counters[name] = self.counters.get(name, 0) + value


def _connector_metrics(module: ModuleType) -> None:
    """``vllm.distributed...offloading.metrics``: ``OffloadingConnectorStats`` is only built by
    ``get_stats`` (metrics reporting), read-only over the manager's counters. The real module
    imports the engine config and the connector. The stand-in records what is reported."""
    vars(module)["OffloadingConnectorStats"] = _Stats


class _KvHintsEnvelope:
    """Placeholder type of ``ReqContext.kv_hints`` (default None; never read by the CPU tier)."""


def _kv_hints(module: ModuleType) -> None:
    """``vllm.v1.kv_hints``: ``ReqContext`` annotates its optional ``kv_hints`` field with
    ``KvHintsEnvelope``; the CPU manager and its policies never read the field. The real
    package needs ``msgspec``."""
    vars(module)["KvHintsEnvelope"] = _KvHintsEnvelope
    vars(module)["KvHintAction"] = type("KvHintAction", (), {})


def _legacy_kv_cache_utils(module: ModuleType) -> None:
    """``vllm.v1.core.kv_cache_utils`` (0.11.0 only): the offload modules import ``BlockHash``
    from it for annotations; 0.11.0 defines it as ``NewType("BlockHash", bytes)``. The real
    module pulls in the engine's config, hashing and request types."""
    vars(module)["BlockHash"] = NewType("BlockHash", bytes)


class _Array(tuple):  # type: ignore[type-arg]
    """An immutable sequence of ints standing for a 1-D integer ``numpy`` array."""

    def tolist(self) -> list[int]:
        return list(self)


def _array(values: Iterable[int], dtype: object = None) -> _Array:
    return _Array(int(v) for v in values)


def _numpy(module: ModuleType) -> None:
    """``numpy`` (only when it is not installed): the manager passes chunk ids through
    ``np.array(ids, dtype=np.int32)`` into the load/store spec it returns, and names
    ``np.ndarray`` in annotations. The stand-in keeps the ids as a tuple of ints (the same
    values; ids are below 2**31); the manager never reads the array back."""
    vars(module)["array"] = _array
    vars(module)["ndarray"] = _Array
    for name in ("int32", "int64", "uint64"):
        setattr(module, name, type(name, (), {}))


def _override(func: Callable[..., Any]) -> Callable[..., Any]:
    return func


def _typing_extensions(module: ModuleType) -> None:
    """``typing_extensions`` (only when it is not installed): ``@override`` is an identity
    decorator at run time."""
    vars(module)["override"] = _override


#: Stand-ins of the 0.33.0+ generation (``CPUOffloadingManager`` with cache policies).
CORE_STUBS: dict[str, Callable[[ModuleType], None]] = {
    "torch": _torch,
    "vllm.logger": _logger,
    "vllm.distributed.kv_transfer.kv_connector.v1.offloading.metrics": _connector_metrics,
    "vllm.v1.kv_hints": _kv_hints,
}

#: Stand-ins of the 0.11.0 generation (``LRUOffloadingManager(backend)``).
LEGACY_STUBS: dict[str, Callable[[ModuleType], None]] = {
    "vllm.v1.core.kv_cache_utils": _legacy_kv_cache_utils,
}

NUMPY_STUB: Callable[[ModuleType], None] = _numpy
TYPING_EXTENSIONS_STUB: Callable[[ModuleType], None] = _typing_extensions
