"""One manager behind the family's vocabulary: key indices in, key indices out, whatever the
API generation, and each call as the line a reproducer script makes.

The 0.33.0+ API (``ModernTier``): every call takes the request's ``ReqContext`` (created on
the request's first operation, ``on_new_request`` then; with positions, every key's end-token
position is set in it). The 0.11.0 API (``LegacyTier``): calls take block hashes only;
``lookup(hashes)`` counts the leading ready ones, so a key being written reads as MISS; a
request's finish is told as ``touch`` of the keys it used, head to tail (its LRU's recency
call, which the 0.11.0 connector makes for a request's blocks).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from models.families.offload.ops import NUM_KEYS, block_hash, group, key_bytes, position
from properties.families.offload.targets import OffloadTarget


@dataclass(frozen=True)
class StoreOut:
    """What ``prepare_store`` answered: keys to store, their chunk ids, keys evicted."""

    to_store: tuple[int, ...]
    chunks: tuple[Any, ...]
    evicted: tuple[int, ...]


def _ids(spec: Any) -> tuple[Any, ...]:
    """The chunk ids of a load/store spec (a numpy array upstream, a tuple bundled)."""
    ids = getattr(spec, "block_ids", None)
    if ids is None:
        raise TypeError(f"a load/store spec without block_ids: {spec!r}")
    return tuple(int(i) if hasattr(i, "__index__") else i for i in ids)


class Tier(ABC):
    """The family's calls on one manager (see the module docstring)."""

    legacy = False

    def __init__(self, target: OffloadTarget, manager: Any) -> None:
        self.target = target
        self.manager = manager
        self.keys = [self.key(i) for i in range(NUM_KEYS)]
        self.index = {k: i for i, k in enumerate(self.keys)}
        self.used: dict[int, list[int]] = {}  # request -> keys it used, first use first

    def key(self, i: int) -> Any:
        return key_bytes(i)

    def indices(self, keys: Iterable[Any], what: str) -> tuple[int, ...]:
        out = []
        for k in keys:
            if k not in self.index:
                raise TypeError(f"{what} names a key the caller never used: {k!r}")
            out.append(self.index[k])
        return tuple(out)

    def note_use(self, req: int, keys: Iterable[int]) -> None:
        used = self.used.setdefault(req, [])
        used.extend(k for k in keys if k not in used)

    @staticmethod
    def klist(keys: Iterable[int]) -> str:
        return "[" + ", ".join(f"K[{k}]" for k in keys) + "]"

    @abstractmethod
    def new_request(self, req: int, positions: bool) -> None: ...

    @abstractmethod
    def lookup(self, req: int | None, key: int) -> str:
        """HIT, HIT_PENDING or MISS (``req`` None: a probe outside any request)."""

    @abstractmethod
    def prepare_load(self, req: int, keys: tuple[int, ...]) -> tuple[Any, ...]: ...

    @abstractmethod
    def complete_load(self, req: int, keys: tuple[int, ...]) -> None: ...

    @abstractmethod
    def prepare_store(self, req: int, keys: tuple[int, ...]) -> StoreOut | None: ...

    @abstractmethod
    def complete_store(self, req: int, keys: tuple[int, ...], success: bool) -> None: ...

    @abstractmethod
    def finish(self, req: int) -> None: ...

    @abstractmethod
    def reset(self) -> None: ...

    @abstractmethod
    def flushed(self) -> None: ...

    @abstractmethod
    def take_events(self) -> list[tuple[bool, tuple[int, ...]]]:
        """``(removed, keys)`` per event, in order."""

    @abstractmethod
    def free_count(self) -> int | None:
        """The public free-chunk count (None: the manager has none)."""

    def pins(self) -> tuple[int | None, ...] | None:
        """Each key's chunk reference count (-1 write pending, 0 evictable, n loads in
        flight; None: not resident), read through the policy's side-effect-free ``get``
        where the manager has one (None: it has not). The one internal the judge reads: a
        refused call that pins or unpins a chunk changes no public answer until a later store
        is refused."""
        get = getattr(getattr(self.manager, "_policy", None), "get", None)
        if not callable(get):
            return None
        return tuple(getattr(get(key), "ref_cnt", None) for key in self.keys)

    @abstractmethod
    def prelude(self) -> list[str]:
        """Script lines after the manager is built (``K``, contexts)."""

    @abstractmethod
    def line(self, op: Any) -> str:
        """The script line making ``op``'s call."""


class ModernTier(Tier):
    """The 0.33.0+ API."""

    def __init__(self, target: OffloadTarget, manager: Any) -> None:
        super().__init__(target, manager)
        self.contexts: dict[int, Any] = {}
        self.probe = target.req_context_cls(req_id="probe")

    def ctx(self, req: int, positions: bool = True) -> Any:
        if req not in self.contexts:
            c = self.target.req_context_cls(req_id=f"r{req}")
            if positions:
                for i, key in enumerate(self.keys):
                    c.set_offload_key_position(key, position(i))
            self.contexts[req] = c
            self.manager.on_new_request(c)
        return self.contexts[req]

    def new_request(self, req: int, positions: bool) -> None:
        self.ctx(req, positions)

    def lookup(self, req: int | None, key: int) -> str:
        ctx = self.probe if req is None else self.ctx(req)
        return str(self.manager.lookup(self.keys[key], ctx).name)

    def prepare_load(self, req: int, keys: tuple[int, ...]) -> tuple[Any, ...]:
        return _ids(self.manager.prepare_load([self.keys[k] for k in keys], self.ctx(req)))

    def complete_load(self, req: int, keys: tuple[int, ...]) -> None:
        self.manager.complete_load([self.keys[k] for k in keys], self.ctx(req))

    def prepare_store(self, req: int, keys: tuple[int, ...]) -> StoreOut | None:
        out = self.manager.prepare_store([self.keys[k] for k in keys], self.ctx(req))
        if out is None:
            return None
        return StoreOut(self.indices(out.keys_to_store, "keys_to_store"), _ids(out.store_spec),
                        self.indices(out.evicted_keys, "evicted_keys"))

    def complete_store(self, req: int, keys: tuple[int, ...], success: bool) -> None:
        self.manager.complete_store([self.keys[k] for k in keys], self.ctx(req),
                                    success=success)

    def finish(self, req: int) -> None:
        self.manager.on_request_finished(self.ctx(req))

    def reset(self) -> None:
        self.manager.reset_cache()

    def flushed(self) -> None:
        if self.target.caps.on_reset_flushed:
            self.manager.on_reset_flushed()

    def take_events(self) -> list[tuple[bool, tuple[int, ...]]]:
        return [(bool(e.removed), self.indices(e.keys, "an event"))
                for e in self.manager.take_events()]

    def free_count(self) -> int | None:
        if not self.target.caps.free_count:
            return None
        return int(self.manager.get_num_free_chunks())

    # ------------------------------------------------------------------ script lines

    def prelude(self) -> list[str]:
        return ["K = [bytes([i + 1]) * 8 + int(i >= 6).to_bytes(4, 'big') for i in range(8)]",
                "contexts = {}",
                "",
                "def ctx(r, positions=True):",
                "    if r not in contexts:",
                "        contexts[r] = c = ReqContext(req_id=f'r{r}')",
                "        for i, key in enumerate(K):",
                "            if positions:",
                "                c.set_offload_key_position(key, 16 * (i + 1))",
                "        mgr.on_new_request(c)",
                "    return contexts[r]",
                ""]

    def line(self, op: Any) -> str:
        kind = op.kind
        if kind == "new_request":
            return f"ctx({op.req}, positions={op.positions})"
        if kind == "lookup":
            return f"print(mgr.lookup(K[{op.key}], ctx({op.req})).name)"
        if kind == "prepare_load":
            return (f"print('load', list(mgr.prepare_load({self.klist(op.keys)}, "
                    f"ctx({op.req})).block_ids))")
        if kind == "complete_load":
            return f"mgr.complete_load({self.klist(op.keys)}, ctx({op.req}))"
        if kind == "prepare_store":
            return (f"out = mgr.prepare_store({self.klist(op.keys)}, ctx({op.req})); "
                    "print('store', out and ([K.index(k) for k in out.keys_to_store], "
                    "list(out.store_spec.block_ids), [K.index(k) for k in out.evicted_keys]))")
        if kind == "complete_store":
            return (f"mgr.complete_store({self.klist(op.keys)}, ctx({op.req}), "
                    f"success={op.success})")
        if kind == "finish":
            return f"mgr.on_request_finished(ctx({op.req}))"
        if kind == "reset":
            return "mgr.reset_cache()"
        if kind == "flushed":
            return ("mgr.on_reset_flushed()" if self.target.caps.on_reset_flushed
                    else "pass  # the workers flushed (this manager has no hook)")
        return ("print('events', [(e.removed, [K.index(k) for k in e.keys]) "
                "for e in mgr.take_events()])")


class LegacyTier(Tier):
    """The 0.11.0 API (block hashes, no request contexts)."""

    legacy = True

    def key(self, i: int) -> Any:
        return block_hash(i)

    def new_request(self, req: int, positions: bool) -> None:
        self.used.setdefault(req, [])

    def lookup(self, req: int | None, key: int) -> str:
        return "HIT" if self.manager.lookup([self.keys[key]]) == 1 else "MISS"

    def prepare_load(self, req: int, keys: tuple[int, ...]) -> tuple[Any, ...]:
        self.note_use(req, keys)
        return _ids(self.manager.prepare_load([self.keys[k] for k in keys]))

    def complete_load(self, req: int, keys: tuple[int, ...]) -> None:
        self.manager.complete_load([self.keys[k] for k in keys])

    def prepare_store(self, req: int, keys: tuple[int, ...]) -> StoreOut | None:
        self.note_use(req, keys)
        out = self.manager.prepare_store([self.keys[k] for k in keys])
        if out is None:
            return None
        return StoreOut(self.indices(out.block_hashes_to_store, "block_hashes_to_store"),
                        _ids(out.store_spec),
                        self.indices(out.block_hashes_evicted, "block_hashes_evicted"))

    def complete_store(self, req: int, keys: tuple[int, ...], success: bool) -> None:
        self.manager.complete_store([self.keys[k] for k in keys], success=success)

    def head_to_tail(self, req: int) -> list[int]:
        return sorted(self.used.get(req, []), key=lambda k: (group(k), k))

    def finish(self, req: int) -> None:
        self.manager.touch([self.keys[k] for k in self.head_to_tail(req)])

    def reset(self) -> None:
        raise TypeError("this manager has no reset_cache")

    def flushed(self) -> None:
        return

    def take_events(self) -> list[tuple[bool, tuple[int, ...]]]:
        return [(bool(e.removed), self.indices(e.block_hashes, "an event"))
                for e in self.manager.take_events()]

    def free_count(self) -> int | None:
        return None

    def prelude(self) -> list[str]:
        return ["K = [bytes([i + 1]) * 8 for i in range(8)]", ""]

    def line(self, op: Any) -> str:
        kind = op.kind
        if kind == "new_request":
            return f"pass  # request {op.req} arrives (this API has no request contexts)"
        if kind == "lookup":
            return f"print(mgr.lookup([K[{op.key}]]))"
        if kind == "prepare_load":
            return f"print('load', list(mgr.prepare_load({self.klist(op.keys)}).block_ids))"
        if kind == "complete_load":
            return f"mgr.complete_load({self.klist(op.keys)})"
        if kind == "prepare_store":
            return (f"out = mgr.prepare_store({self.klist(op.keys)}); print('store', out and "
                    "([K.index(k) for k in out.block_hashes_to_store], "
                    "list(out.store_spec.block_ids), "
                    "[K.index(k) for k in out.block_hashes_evicted]))")
        if kind == "complete_store":
            return f"mgr.complete_store({self.klist(op.keys)}, success={op.success})"
        if kind == "finish":
            return f"mgr.touch({self.klist(self.head_to_tail(op.req))})"
        if kind in ("reset", "flushed"):
            return f"pass  # {kind}: this manager has no hook"
        return ("print('events', [(e.removed, [K.index(k) for k in e.block_hashes]) "
                "for e in mgr.take_events()])")


def tier(target: OffloadTarget, manager: Any) -> Tier:
    """The adapter for ``manager``'s API generation."""
    return LegacyTier(target, manager) if target.caps.legacy else ModernTier(target, manager)
