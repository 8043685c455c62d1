"""Stand-ins for the engine modules upstream's v1 block code imports, and the request it reads.

Each builder fills a fresh module object with only what ``block_pool.py``,
``kv_cache_utils.py``, ``kv_cache_metrics.py`` and ``utils/hashing.py`` use at run time. Names
those modules import only for annotations or for engine-configuration helpers the suite never
calls (``VllmConfig``, the ``kv_cache_interface`` specs, ``PrefixCacheStats``, ...) resolve to
inert placeholder classes through a module ``__getattr__``; calling such a helper is outside the
suite. Nothing here changes the behaviour of the code under test:

* events are plain records of the keyword arguments upstream passes (upstream: msgspec structs);
* ``envs.VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES`` is False, so events carry the raw ``bytes`` keys
  the pool stores (upstream's default converts them to 64-bit ints, a lossy view for routers);
* ``tensor_data`` returns the bytes of a prompt-embeds stand-in (``bytes``, one per token);
* ``get_mm_features_in_window`` is the bisection its docstring specifies;
* fallbacks only, where the real module cannot load: vLLM 0.11's monolithic ``vllm.utils``
  (``cdiv`` and the pickle SHA-256 hashers), ``cbor2``, and 0.34's ``token_buffer`` without
  numpy (``token_slice``, a plain slice).
"""

from __future__ import annotations

import bisect
import hashlib
import logging
import pickle
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

__all__ = ["STUBS", "LoraRef", "MMFeature", "MMPosition", "Record", "StandInRequest"]


class Record:
    """An event as a record of the keyword arguments it was built with (equal by fields)."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and vars(other) == vars(self)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        body = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({body})"


@dataclass(frozen=True, slots=True)
class MMPosition:
    """Where a multimodal item sits in the prompt (upstream ``PlaceholderRange``)."""

    offset: int
    length: int


@dataclass(frozen=True, slots=True)
class MMFeature:
    """A multimodal item: its content identifier and placeholder range."""

    identifier: str
    mm_position: MMPosition


@dataclass(frozen=True, slots=True)
class LoraRef:
    """A LoRA adapter as the releases read it (0.11: ``lora_int_id``; 0.33: name and path)."""

    lora_int_id: int
    lora_name: str
    lora_path: str

    @property
    def adapter_id(self) -> int:
        return self.lora_int_id

    @property
    def id(self) -> int:
        return self.lora_int_id

    @property
    def name(self) -> str:
        return self.lora_name


@dataclass(eq=False)
class StandInRequest:
    """What the block code reads from ``vllm.v1.request.Request``.

    ``block_hashes`` is filled by whoever owns the request (the machine uses the target's own
    ``get_request_block_hasher``); ``prompt_embeds`` is ``bytes`` (one byte per token) or None.
    """

    request_id: str
    all_token_ids: list[int]
    lora_request: LoraRef | None = None
    cache_salt: str | None = None
    mm_features: list[MMFeature] = field(default_factory=list)
    prompt_embeds: bytes | None = None
    block_hashes: list[bytes] = field(default_factory=list)
    session_id: str | None = None
    _prompt_embeds_per_block_hashes: dict[tuple[int, int], bytes] = field(default_factory=dict)

    @property
    def num_tokens(self) -> int:
        return len(self.all_token_ids)

    @property
    def _all_token_ids(self) -> list[int]:
        """0.34's hasher slices the token buffer directly (upstream: an ``array`` subclass;
        the hasher makes a tuple of the slice either way)."""
        return self.all_token_ids


class _Placeholder:
    """An engine type the suite never constructs (annotations, unused config helpers)."""


def _placeholders(module: ModuleType) -> None:
    """Resolve any other name of ``module``: a placeholder class (capitalised names) or a
    function that refuses to run (engine-config helpers the suite never calls)."""

    def __getattr__(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        value: Any
        if name[:1].isupper():
            value = type(name, (_Placeholder,), {"__module__": module.__name__})
        else:

            def value(*_args: object, **_kwargs: object) -> None:
                raise NotImplementedError(f"{module.__name__}.{name} is not stubbed")

            value.__name__ = name
        setattr(module, name, value)
        return value

    module.__getattr__ = __getattr__  # type: ignore[method-assign]


class _EngineLogger(logging.LoggerAdapter):  # type: ignore[type-arg]
    """A stdlib logger with the engine's ``*_once`` helpers (plain calls here)."""

    def warning_once(self, msg: str, *args: object) -> None:
        self.warning(msg, *args)

    def info_once(self, msg: str, *args: object) -> None:
        self.info(msg, *args)

    def debug_once(self, msg: str, *args: object) -> None:
        self.debug(msg, *args)


def _build_logger(module: ModuleType) -> None:
    """``init_logger``: stdlib loggers under ``vllm`` (quiet unless the caller configures it)."""
    logging.getLogger("vllm").addHandler(logging.NullHandler())

    def init_logger(name: str) -> _EngineLogger:
        return _EngineLogger(logging.getLogger(name), {})

    vars(module).update(init_logger=init_logger)


def _build_envs(module: ModuleType) -> None:
    vars(module).update(VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=False)


def _build_kv_events(module: ModuleType) -> None:
    names = ("KVCacheEvent", "BlockStored", "BlockRemoved", "AllBlocksCleared")
    base = type("KVCacheEvent", (Record,), {"__module__": module.__name__})
    classes = {"KVCacheEvent": base}
    for name in names[1:]:
        classes[name] = type(name, (base,), {"__module__": module.__name__})
    vars(module).update(classes, MEDIUM_GPU="GPU", MEDIUM_CPU="CPU", MEDIUM_STORAGE="STORAGE")


def _get_mm_features_in_window(
    mm_features: Sequence[MMFeature], start: int, end: int
) -> tuple[int, int]:
    """(lo, hi): indices of the features overlapping ``[start, end)`` (sorted, disjoint)."""
    lo = bisect.bisect_left(
        mm_features, start + 1, key=lambda f: f.mm_position.offset + f.mm_position.length
    )
    hi = bisect.bisect_left(mm_features, end, key=lambda f: f.mm_position.offset)
    return lo, hi


def _build_mm_utils(module: ModuleType) -> None:
    vars(module).update(get_mm_features_in_window=_get_mm_features_in_window)
    _placeholders(module)


def _build_request(module: ModuleType) -> None:
    vars(module).update(Request=StandInRequest)
    _placeholders(module)


def _build_v1_utils(module: ModuleType) -> None:
    def tensor_data(tensor: bytes) -> memoryview:
        return memoryview(tensor)

    vars(module).update(tensor_data=tensor_data)


def _build_metrics_stats(module: ModuleType) -> None:
    @dataclass
    class KVCacheEvictionEvent:
        lifetime_seconds: float
        idle_seconds: float
        reuse_gaps_seconds: tuple[float, ...]

    KVCacheEvictionEvent.__module__ = module.__name__
    vars(module).update(KVCacheEvictionEvent=KVCacheEvictionEvent)
    _placeholders(module)


def _cdiv(a: int, b: int) -> int:
    return -(a // -b)


def _sha256(data: Any) -> bytes:
    return hashlib.sha256(pickle.dumps(data, protocol=pickle.HIGHEST_PROTOCOL)).digest()


def _build_engine_utils(module: ModuleType) -> None:
    """Pre-split ``vllm.utils`` (0.11): ``cdiv``, ``GiB_bytes`` and the pickle SHA-256 hashers.

    ``sha256_cbor`` needs ``cbor2``; without it, calling it raises ``ModuleNotFoundError``.
    """

    def sha256_cbor(data: Any) -> bytes:
        import cbor2  # type: ignore[import-not-found]  # optional, as upstream

        return hashlib.sha256(cbor2.dumps(data, canonical=True)).digest()

    vars(module).update(cdiv=_cdiv, GiB_bytes=1 << 30, sha256=_sha256, sha256_cbor=sha256_cbor)


def _build_cbor2(module: ModuleType) -> None:
    """``cbor2`` when it is not installed: importable, ``dumps`` refuses (no CBOR hasher)."""

    def dumps(*_args: object, **_kwargs: object) -> bytes:
        raise ModuleNotFoundError("cbor2 is not installed (the *_cbor hashers need it)")

    vars(module).update(dumps=dumps)


def _token_slice(tokens: Sequence[int], start: int, stop: int) -> Sequence[int]:
    """``tokens[start:stop]`` (upstream slices its ``array``-based token buffer the same way)."""
    return tokens[start:stop]


def _build_token_buffer(module: ModuleType) -> None:
    """0.34's ``vllm.v1.token_buffer`` when numpy (its buffer's dependency) is not installed:
    ``token_slice``, the one name the pool's closure imports."""
    vars(module).update(token_slice=_token_slice)
    _placeholders(module)


def _build_inert(module: ModuleType) -> None:
    _placeholders(module)


# Stub modules by dotted name; ``vllm.utils`` and ``cbor2`` are used only when needed.
STUBS: dict[str, Callable[[ModuleType], None]] = {
    "vllm.envs": _build_envs,
    "vllm.config": _build_inert,
    "vllm.logger": _build_logger,
    "vllm.multimodal.utils": _build_mm_utils,
    "vllm.v1.kv_cache_interface": _build_inert,
    "vllm.v1.kv_cache_spec_registry": _build_inert,
    "vllm.v1.request": _build_request,
    "vllm.v1.utils": _build_v1_utils,
    "vllm.distributed.kv_events": _build_kv_events,
    "vllm.v1.metrics.stats": _build_metrics_stats,
}
ENGINE_UTILS_STUB = _build_engine_utils
CBOR2_STUB = _build_cbor2
TOKEN_BUFFER_STUB = _build_token_buffer
