"""Upstream SGLang's request API, driven as its scheduler drives it, in plain ints (the driver
half of :mod:`properties.families.sglang.requests`).

What runs is upstream's: the cache's ``checkpoint`` (0.5.22 on; 0.5.18:
``cache_unfinished_req``), ``common.release_kv_cache`` (0.5.18: ``cache_finished_req`` and,
for a retraction, the scheduler's own release calls), ``match_prefix``, ``lock``, the
allocators, and the wheel's own ``ReqToTokenPool`` and ``ReqKvInfo`` classes: their source is
read from the wheel (``memory_pool.py`` and ``schedule_batch.py`` import the GPU engine, so the
loader serves neither module) and executed alone, with the few names their bodies use
(:func:`wheel_class`). The scheduler's part is this module's: a request's admission (match all
its tokens, lock the match, take a row, write the matched slots into it), the allocation of a
chunk's or a decode step's slots into its row (``alloc`` at page size 1, else
``alloc_extend`` / ``alloc_decode``), and ``finished_reason`` before a finish.

Stand-ins (each checked by ``tests/sglang/test_requests.py``):

* :class:`Req`: upstream's ``Req`` is the whole scheduler's request (sampling, logprobs,
  multimodal inputs, ...); the cache reads only the fields set here, and any other read is an
  ``AttributeError``, never a default. Its values are upstream's defaults for a plain text
  request: no session, no cache salt, priority None, not barred from the tree.
* ``TorchMemorySaverAdapter`` in ``ReqToTokenPool.__init__``: upstream's adapter with the
  memory saver off (its default) is a no-op ``region`` context; so is this one.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import sys
import types
import typing
import zipfile
from array import array
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

__all__ = ["ROWS", "LegacyReq", "Req", "RequestCalls", "pool_classes", "wheel_class"]

#: Rows of the request-to-token pool (the request level keeps fewer requests alive).
ROWS = 16


def wheel_class(origin: str, member: str, name: str, names: Mapping[str, Any]) -> type[Any]:
    """Class ``name`` of the wheel's module ``member`` (``sglang/...py``), executed alone from
    the wheel's source (never copied) with postponed annotations and ``names`` as its
    globals; raises KeyError when the module has no such class."""
    with zipfile.ZipFile(origin) as archive:
        source = archive.read(member).decode()
    tree = ast.parse(source)
    found = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name]
    if not found:
        raise KeyError(f"{origin}: {member} has no class {name}")
    future = ast.ImportFrom(module="__future__", names=[ast.alias("annotations")], level=0)
    module = ast.Module(body=[future, found[0]], type_ignores=[])
    ast.fix_missing_locations(module)
    # Executed in a module of its own, registered while it runs (dataclasses look it up),
    # under a name no import can reach.
    home = types.ModuleType(f"<wheel>.{member[:-3].replace('/', '.')}")
    home.__dict__.update(names)
    sys.modules[home.__name__] = home
    try:
        exec(compile(module, f"{origin}!{member}", "exec"), home.__dict__)
    finally:
        del sys.modules[home.__name__]
    cls: type[Any] = home.__dict__[name]
    return cls


class _MemorySaver:
    """``TorchMemorySaverAdapter`` with the memory saver off: ``region`` does nothing."""

    @staticmethod
    def create(enable: bool) -> _MemorySaver:
        if enable:
            raise ValueError("the memory saver is off in every pool the suite builds")
        return _MemorySaver()

    @contextlib.contextmanager
    def region(self, tag: object) -> Iterator[None]:
        yield


def _ceil_align(x: int, y: int) -> int:
    return -(-x // y) * y


def pool_classes(origin: str) -> tuple[type[Any], type[Any] | None]:
    """The wheel's ``ReqToTokenPool`` and ``ReqKvInfo`` (None: the release keeps a request's
    row on ``Req`` itself)."""
    import torch

    typing_names = {n: getattr(typing, n) for n in ("Any", "Callable", "List", "Optional")}
    pool = wheel_class(origin, "sglang/srt/mem_cache/memory_pool.py", "ReqToTokenPool", {
        "torch": torch, **typing_names, "TorchMemorySaverAdapter": _MemorySaver,
        "GPU_MEMORY_TYPE_KV_CACHE": "kv_cache"})
    try:
        kv = wheel_class(origin, "sglang/srt/managers/schedule_batch.py", "ReqKvInfo", {
            "dataclasses": dataclasses, "torch": torch, **typing_names,
            "ceil_align": _ceil_align})
    except KeyError:
        return pool, None
    return pool, kv


class Req:
    """A text request as the cache reads it (see the module docstring); ``kv`` is the wheel's
    ``ReqKvInfo``."""

    def __init__(self, rid: str, tokens: Sequence[int], extra_key: str | None,
                 kv: Any) -> None:
        self.rid = rid
        self.origin_input_ids = array("q", tokens)
        self.output_ids = array("q")
        self.full_untruncated_fill_ids = array("q", tokens)
        self.extra_key = extra_key
        self.kv = kv
        self.cache_salt: str | None = None
        self.priority: int | None = None
        self.session_id: str | None = None
        self.session: Any = None
        self.kv_rotation_base: int | None = None
        self.skip_radix_cache_insert = False
        self.finished_reason: object = None
        self.finished_len: int | None = None
        self.prefix_len = 0
        self.last_node: Any = None
        self.lock: Any = None

    def finished(self) -> bool:
        return self.finished_reason is not None

    def owned_kv_len(self) -> int:
        """Upstream's for a request without a stop inside its outputs: the committed KV."""
        return int(self.kv.kv_committed_len)

    def refresh_fill_ids(self) -> None:
        self.full_untruncated_fill_ids = self.origin_input_ids + self.output_ids

    def reset_for_retract(self) -> None:
        """The fields upstream's ``reset_for_retract`` resets that the cache reads."""
        self.prefix_len = 0
        self.last_node = None
        self.lock = None
        self.kv.cache_protected_len = 0
        self.kv.cache_inserted_len = 0
        self.kv.kv_committed_len = 0


class LegacyReq(Req):
    """0.5.18's layout of the same request: the row on ``req_pool_idx``, the committed and
    protected lengths on the request, ``kv`` the wheel's ``ReqKvInfo(kv_allocated_len,
    swa_evicted_seqlen)`` while it holds a row (None otherwise), ``prefix_indices``."""

    def __init__(self, rid: str, tokens: Sequence[int], extra_key: str | None,
                 kv: Any) -> None:
        super().__init__(rid, tokens, extra_key, None)
        self._kv_cls = kv
        self.req_pool_idx: int | None = None
        self.kv_committed_len = 0
        self.cache_protected_len = 0
        self.prefix_indices: Any = None
        self.reasoning_tokens = 0

    def get_fill_ids(self) -> array[int]:
        return self.full_untruncated_fill_ids[:self.kv_committed_len]

    def effective_kv_committed_len(self) -> int:
        """Upstream's with thinking tokens cached (the default): the committed KV."""
        return self.kv_committed_len

    def owned_kv_len(self) -> int:
        return self.kv_committed_len

    def reset_for_retract(self) -> None:
        self.prefix_len = 0
        self.last_node = None
        self.prefix_indices = None
        self.cache_protected_len = 0
        self.kv_committed_len = 0


class RequestCalls:
    """The request API of a driver over upstream's ``cache`` (a tree built with
    ``req_to_token_pool=pool``), ``allocator`` and the helpers of
    :class:`~properties.families.sglang.driver.UpstreamTree` (``alloc``, ``alloc_extend``,
    ``alloc_decode``, ``key``)."""

    cache: Any
    mods: Any
    pool: Any
    #: 0.5.18's request API (``cache_unfinished_req`` / ``cache_finished_req`` through
    #: ``release_kv_cache(req, tree, is_insert)``, the row on the request).
    legacy: bool = False
    page_size: int
    _kv_cls: Any
    _release: Callable[..., None]
    _match_params: Any

    def alloc(self, n: int) -> list[int] | None: ...

    def alloc_extend(self, prefix_len: int, seq_len: int,
                     last_loc: int) -> list[int] | None: ...

    def alloc_decode(self, seq_len: int, last_loc: int) -> list[int] | None: ...

    extends: bool

    def key(self, tokens: Sequence[int], extra_key: str | None) -> Any: ...

    def req_open(self, tokens: Sequence[int], extra_key: str | None = None) -> Req:
        self._rids = getattr(self, "_rids", 0) + 1
        if self.legacy:
            return LegacyReq(f"r{self._rids}", tokens, extra_key, self._kv_cls)
        return Req(f"r{self._rids}", tokens, extra_key, self._kv_cls())

    def req_admit(self, req: Req) -> tuple[int, list[int]]:
        """Admission: match all its tokens, lock the match, take a row holding the match."""
        from properties.families.sglang.upstream import read_match

        params = self._match_params(key=self.key(req.full_untruncated_fill_ids, req.extra_key))
        with self.mods.activated():
            length, node, slots = read_match(self.cache.match_prefix(params), self.cache)
            req.prefix_len, req.last_node = length, node
            if self.legacy:  # 0.5.18's scheduler locks the node itself
                self.cache.inc_lock_ref(node)
            else:
                req.lock = self.cache.lock(node)
        if self.pool.alloc([req]) is None:
            raise RuntimeError(f"no request row left of {ROWS}")
        if isinstance(req, LegacyReq):
            import torch

            req.kv = req._kv_cls(kv_allocated_len=length, swa_evicted_seqlen=0)
            req.cache_protected_len = req.kv_committed_len = length
            req.prefix_indices = torch.tensor(slots, dtype=torch.int64)
        else:
            kv = req.kv
            kv.cache_protected_len = kv.kv_committed_len = kv.kv_allocated_len = length
        self._write(req, 0, slots)
        return length, slots

    def req_extend(self, req: Req, n: int) -> list[int] | None:
        have = self._committed(req)
        got = self._slots(have, n, self._last(req, have))
        if got is None:
            return None
        self._write(req, have, got)
        self._commit(req, have + n)
        return got

    def req_decode(self, req: Req, token: int) -> int | None:
        have = self._committed(req)
        last = self._last(req, have)
        got = (self.alloc_decode(have + 1, last) if self.page_size > 1 and self.extends
               else self._slots(have, 1, last))
        if got is None:
            return None
        req.output_ids.append(token)
        req.refresh_fill_ids()
        self._write(req, have, got)
        self._commit(req, have + 1)
        return int(got[0])

    def req_checkpoint(self, req: Req) -> None:
        with self.mods.activated():  # upstream imports lazily
            if self.legacy:
                self.cache.cache_unfinished_req(req, chunked=True)
            else:
                self.cache.checkpoint(req, up_to=self._committed(req))

    def req_release(self, req: Req, checkpoint: bool) -> None:
        """Finish (``checkpoint``: finished first) or retract: upstream's release path."""
        if checkpoint:
            req.finished_reason = "length"
        with self.mods.activated():
            if self.legacy:
                self._release(req, self.cache, is_insert=checkpoint)
            else:
                self._release(req, self.cache, checkpoint=checkpoint)
        if not checkpoint:
            req.reset_for_retract()

    def req_row(self, req: Req) -> list[int]:
        idx = self._idx(req)
        if idx is None:
            return []
        return [int(s) for s in self.pool.req_to_token[idx, :self._committed(req)].tolist()]

    def req_tokens(self, req: Req) -> list[int]:
        return list(req.full_untruncated_fill_ids)

    def req_running(self, req: Req) -> bool:
        return self._idx(req) is not None

    def _slots(self, have: int, n: int, last: int) -> list[int] | None:
        """Slots for row positions ``[have, have + n)``: ``alloc`` at page size 1, else
        ``alloc_extend``; where the allocator has no CPU path for it (0.5.18: triton only),
        the same slots through ``alloc``: the rest of the last page, then whole pages."""
        ps = self.page_size
        if ps == 1:
            return self.alloc(n)
        if self.extends:
            return self.alloc_extend(have, have + n, last)
        head = list(range(last + 1, last + 1 + min(n, -have % ps))) if have % ps else []
        rest = n - len(head)
        pages = self.alloc(-(-rest // ps) * ps) if rest else []
        return None if pages is None else head + pages[:rest]

    def _idx(self, req: Req) -> int | None:
        idx = req.req_pool_idx if isinstance(req, LegacyReq) else req.kv.req_pool_idx
        return None if idx is None else int(idx)

    def _committed(self, req: Req) -> int:
        return int(req.kv_committed_len if isinstance(req, LegacyReq)
                   else req.kv.kv_committed_len)

    def _commit(self, req: Req, n: int) -> None:
        if isinstance(req, LegacyReq):
            req.kv_committed_len = req.kv.kv_allocated_len = n
        else:
            req.kv.kv_committed_len = req.kv.kv_allocated_len = n

    def _last(self, req: Req, have: int) -> int:
        return int(self.pool.req_to_token[self._idx(req), have - 1]) if have else -1

    def _write(self, req: Req, start: int, slots: Sequence[int]) -> None:
        import torch

        if slots:
            self.pool.write((self._idx(req), slice(start, start + len(slots))),
                            torch.tensor(list(slots), dtype=torch.int32))
