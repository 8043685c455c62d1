"""An injected hash function (:class:`~models.families.v0.operations.InjectedHash`; an extension).

API.md keys a prefix-caching block by ``hash_block_tokens`` (3.3). A target whose device-aware
factory also takes ``hash_function`` (``CpuGpuBlockAllocator.create(..., hash_function=f)``)
promises that ``f`` replaces that key for every block of **both** devices' allocators: a full
block's ``content_hash`` is ``f(is_first_block, prev_block_hash, token_ids, extra_hash)``, with
``prev_block_hash`` its predecessor's ``content_hash`` (``None`` for a first block), whether the
block was allocated immutable, alone or in a chain, or filled by appends; and blocks whose keys
``f`` makes equal share one id (a cache hit, API.md 4.1 and 4.4), as equal contents do under the
default hash (HASH for the values, CACHE for the ids).

:func:`injected_hash` is the function the suite injects: deterministic in every process (no
``hash()`` of ``None`` or strings) and blind to token order within a block, so a permutation of
a block's tokens collides with it, which the default hash never makes equal.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from models.core.invariants import Family
from models.families.v0 import operations as ops
from models.families.v0.allocator_model import Model
from models.families.v0.operations import Dev

F = Family

_MASK = (1 << 64) - 1
_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3


class InjectedOut(Exception):
    """The operation is out of contract."""


def injected_hash(is_first_block: bool, prev_block_hash: int | None,
                  cur_block_token_ids: Sequence[int], extra_hash: int | None = None) -> int:
    """FNV-1a over the first flag, the predecessor's hash, the block's tokens **sorted** and
    the extra hash (``hash_block_tokens``' arguments): a non-negative int below ``2**64``."""
    words = (int(bool(is_first_block)), -1 if prev_block_hash is None else prev_block_hash,
             *sorted(int(t) for t in cur_block_token_ids), -1 if extra_hash is None else extra_hash)
    h = _FNV_OFFSET
    for word in words:
        h = ((h ^ (word & _MASK)) * _FNV_PRIME) & _MASK
    return h


def injected_contract(op: ops.InjectedHash, block_size: int) -> None:
    """Raise :class:`InjectedOut` unless each block is full and ``permuted`` is a permutation of
    ``tokens``; never misuse."""
    for name in ("tokens", "permuted", "tail"):
        tokens = getattr(op, name)
        if len(tokens) != block_size or not all(type(t) is int for t in tokens):
            raise InjectedOut(f"{name} must be {block_size} token ids")
    if sorted(op.permuted) != sorted(op.tokens):
        raise InjectedOut("permuted must be a permutation of tokens")


def expected(op: ops.InjectedHash) -> list[list[int]]:
    """Per device: the three hashes ``[x, z, c1]`` (``injected_hash`` of the blocks' tokens)."""
    first = injected_hash(True, None, op.tokens)
    return [[first, first, injected_hash(False, first, op.tail)] for _ in Dev]


def injected_step(m: Model, op: ops.InjectedHash) -> None:
    """Judge the read-outs (the module docstring): hashes per device, and every block of
    ``tokens`` or a permutation of it on the one id ``x`` took."""
    got = m.c.outcome.value
    if not (isinstance(got, dict) and isinstance(got.get("hashes"), list)
            and isinstance(got.get("ids"), list)):
        m.c.flag(F.HASH, "injected hash read-outs missing", observed=got)
        return
    want = expected(op)
    for dev, hashes, want_hashes in zip(Dev, got["hashes"], want, strict=False):
        if hashes != want_hashes:
            m.c.flag(F.HASH, f"content_hash under an injected hash_function ({dev.value}; "
                     "immutable, filled by append, second of a chain)", expected=want_hashes,
                     observed=hashes)
    for dev, ids in zip(Dev, got["ids"], strict=False):
        if len(set(ids)) != 1:
            m.c.flag(F.CACHE, f"blocks whose injected hashes are equal must share one id "
                     f"({dev.value}; immutable, permuted immutable, filled mutable, chain head)",
                     observed=ids)
    if len(got["hashes"]) != len(want) or len(got["ids"]) != len(want):
        m.c.flag(F.HASH, "injected hash read-outs: one entry per device", expected=len(want),
                 observed=[len(got["hashes"]), len(got["ids"])])


INJECTED_HASH_STEPS: dict[type[ops.Op], Callable[[Model, Any], None]] = {
    ops.InjectedHash: injected_step,
}
