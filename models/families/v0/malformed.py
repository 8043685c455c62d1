"""The contract for malformed arguments (:class:`~models.families.v0.operations.Malformed`).

Each argument the API validates has a *type* here: what a well-formed value is, read from
API.md's signatures (token ids are ints and never bools, counts are non-negative ints, devices
are ``Device`` members, time stamps are real numbers a float holds exactly, ...). A call whose
argument is replaced by a value of the wrong type or range is misuse: a target with typed errors
must refuse it with one (``ErrorKind.MISUSE``) and change nothing (ATOMIC), whatever the rest of
the call says; argument checks come before any allocation, so a malformed call that would also
run out of blocks is still misuse.

Replacing an argument the target never reads, or by a value that is in fact well-formed, is
not misuse but out of contract (:class:`NotValidated`): the naive allocator ignores the ids and
time of ``mark_blocks_as_accessed`` and the ids of prefix queries, and ``get_computed_block_ids``
never reads the id it skips.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from models.families.v0 import operations as ops
from models.families.v0.allocator_model import Model
from models.families.v0.capabilities import Config
from models.families.v0.operations import JSON, Dev, Malformed, Op
from models.families.v0.ops.base import Arg
from models.families.v0.request_keys import KEY_ARGUMENTS, key_misuse

__all__ = ["ARGUMENTS", "Arg", "NotValidated", "bad_values", "malformed_misuse", "well_formed"]


class NotValidated(Exception):
    """The replaced argument is not one the target must validate, or the value is valid."""


#: The validated arguments, by operation and field; ``True`` in the second place: only the
#: prefix-caching allocator reads the argument (the naive one ignores it). Operations moved
#: to ``models.families.v0.ops`` hold theirs (``Op.malformed``); the rest are listed here.
ARGUMENTS: dict[tuple[type[Op], str], tuple[Arg, bool]] = {
}
# operations that hold their validated arguments (``Op.malformed``, models.families.v0.ops)
ARGUMENTS.update({(cls, name): spec for cls in ops.OPS_BY_KIND.values()
                  for name, spec in vars(cls).get("malformed", {}).items()})


# --------------------------------------------------------------------------- content hash
# ``hash_block_tokens``' arguments (``HashRecompute.malformed``).


def _hash_well_formed(call: Op, arg: Arg, bad: JSON) -> bool:
    """Valid for ``call`` (any first flag, when it is not a ``HashRecompute``)."""
    first = call.is_first_block if isinstance(call, ops.HashRecompute) else None
    if arg is Arg.FIRST_FLAG:
        return type(bad) is bool and first in (None, bad)
    if arg is Arg.PREV_HASH:
        return (first is not False and bad is None) or (first is not True
                                                        and isinstance(bad, int))
    return isinstance(bad, tuple) and all(isinstance(t, int) for t in bad)


def _hash_bad_values(arg: Arg, like: JSON) -> tuple[JSON, ...]:
    """``like`` is the call's ``is_first_block`` (None: unknown, only values bad for both)."""
    if arg is Arg.FIRST_FLAG:
        flipped = (not like,) if isinstance(like, bool) else ()
        return (*flipped, None, 1, "x")
    if arg is Arg.PREV_HASH:
        wrong = (0, 7) if like is True else (None,) if like is False else ()
        return (*wrong, "x", 1.5)
    tokens = like if isinstance(like, tuple) and like else (0,)
    return (None, 7, "ab", *(item for item in _bad_items(tokens)
                               if not any(type(t) is bool for t in item)))
# --------------------------------------------------------------------------- end content hash


def _plain_int(value: JSON) -> bool:
    return type(value) is int


def _tokens(value: JSON) -> bool:
    return isinstance(value, tuple) and all(map(_plain_int, value))


def _time(value: JSON) -> bool:
    if type(value) is float:
        return not math.isnan(value)
    return type(value) is int and float(value) == value


def well_formed(m: Model, op: Malformed, arg: Arg) -> bool:
    """Whether ``op.bad`` is a valid value of type ``arg`` (a literal is never a block or a
    device)."""
    bad = op.bad
    if arg in (Arg.FIRST_FLAG, Arg.PREV_HASH, Arg.HASH_TOKENS):  # content hash
        return _hash_well_formed(op.call, arg, bad)
    if arg is Arg.GPU_IDS:
        if not isinstance(bad, tuple):
            return False
        read = bad
        if isinstance(op.call, ops.ComputedBlockIds) and op.call.skip_last:
            read = bad[:-1]  # never looked up
        return all(_plain_int(i) and 0 <= i < m.config.num_gpu_blocks for i in read)
    if arg is Arg.PREV_IDS:  # stale ids: only the length is read
        considered = getattr(op.call, "blocks", ())
        skip = bool(getattr(op.call, "skip_last", False))
        return isinstance(bad, tuple) and len(bad) <= len(considered) - skip
    checks: dict[Arg, Callable[[JSON], bool]] = {
        Arg.TOKENS: _tokens,
        Arg.CHUNKS: lambda v: isinstance(v, tuple) and all(map(_tokens, v)),
        Arg.DEVICE: lambda v: isinstance(v, Dev),
        Arg.DEVICE_OR_NONE: lambda v: v is None or isinstance(v, Dev),
        Arg.COUNT: lambda v: _plain_int(v) and v >= 0,
        Arg.EXTRA: lambda v: v is None or _plain_int(v),
        Arg.PREV: lambda v: v is None,
        Arg.BLOCK: lambda v: False,
        Arg.BLOCKS: lambda v: v == (),
        Arg.LIST: lambda v: isinstance(v, tuple),
        Arg.TIME: _time,
    }
    return checks[arg](bad)


def malformed_misuse(m: Model, op: Malformed) -> str:
    """Why ``op`` is misuse; raises :class:`NotValidated` when it is not (the caller has
    checked ``op.call`` itself against the contract)."""
    call = op.call
    if op.argument in KEY_ARGUMENTS:  # request keys: the key builder's arguments
        why = key_misuse(m, op)
        if why is None:
            raise NotValidated(f"{call.kind}: {op.argument}={op.bad!r} is not the target's "
                               f"to refuse (no key builder of its own, no key, or valid)")
        return why
    entry = ARGUMENTS.get((type(call), op.argument))
    if entry is None:
        raise NotValidated(f"{call.kind}: argument {op.argument!r} is not validated")
    arg, prefix_caching_only = entry
    if prefix_caching_only and not m.pc:
        raise NotValidated(f"the naive allocator ignores {call.kind}'s {op.argument}")
    if arg is Arg.EXTRA and not (m.caps.extra_keys and m.caps.vllm_api):
        raise NotValidated("extra_hash given to a target without extra keys")
    if well_formed(m, op, arg):
        raise NotValidated(f"{call.kind}: {op.argument}={op.bad!r} is well-formed")
    return f"{call.kind} with {op.argument}={op.bad!r}, not {arg.value}"


def bad_values(arg: Arg, config: Config, like: JSON = None) -> tuple[JSON, ...]:
    """Typical malformed values of type ``arg`` (for generators): wrong types, bools where
    ints are meant, out-of-range numbers, containers of the wrong items, and ids outside the
    GPU (a CPU id, one past the last id, ``2**64``, ``-1``) for GPU id lists. Token lists and
    chunks keep the shape of ``like`` (the value they replace) with every item, or only the
    last, malformed, so nothing but the item type is wrong."""
    if arg is Arg.TOKENS:
        return (None, 7, "ab", *_bad_items(like if isinstance(like, tuple) and like else (0,)))
    if arg in (Arg.FIRST_FLAG, Arg.PREV_HASH, Arg.HASH_TOKENS):  # content hash
        return _hash_bad_values(arg, like)
    if arg is Arg.CHUNKS:
        chunks = like if isinstance(like, tuple) and like else ((0,),)
        return (None, 7, "ab", (7,) * len(chunks),
                *((*chunks[:-1], bad) for bad in _bad_items(chunks[-1])))
    ids = (-1, 2**64, config.num_gpu_blocks + config.num_cpu_blocks)
    cpu = (config.num_gpu_blocks,) if config.num_cpu_blocks else ()
    return {
        Arg.DEVICE: (None, "gpu", 0, 1.5, True, (1,)),  # (1,): a list, unhashable
        Arg.DEVICE_OR_NONE: ("gpu", 0, 1.5, True),
        Arg.COUNT: (-1, True, 1.5, "1", None, -(2**64)),
        Arg.EXTRA: ("x", 1.5, True, (1,)),
        Arg.PREV: (0, "x", (), True),
        Arg.BLOCK: (None, 0, "x", ()),
        Arg.BLOCKS: (None, 0, "ab", (0,), (None,)),
        Arg.GPU_IDS: (None, 5, "ab", ("x",), (True,), (1.5,), *((i,) for i in ids + cpu)),
        Arg.LIST: (None, 5, "ab"),
        Arg.TIME: (None, "x", True, 2**53 + 1, (1.0,)),
        Arg.PREV_IDS: (None, 5, "ab", (0,) * (config.num_gpu_blocks + 1)),  # stale ids
    }[arg]


def _bad_items(tokens: tuple[JSON, ...]) -> tuple[JSON, ...]:
    """``tokens`` with every item, then only the last, of a wrong type (str, bool, float,
    list, None)."""
    n = len(tokens)
    every = [("x",) * n, (True,) * n, (1.5,) * n, ((1,),) * n]
    return (*every, *((*tokens[:-1], bad) for bad in (True, None, "1")))
