"""``Malformed``: a call with one argument replaced by a value of the wrong type or range.

Each argument the API validates has a *type* (``Op.malformed``, collected in
``models.families.v0.malformed.ARGUMENTS``): what a well-formed value is, read from docs/API.md's
signatures (token ids are ints and never bools, counts are non-negative ints, devices are
``Device`` members, time stamps are real numbers a float holds exactly, ...). A call whose
argument is replaced by a value of the wrong type or range is misuse: a target with typed errors
must refuse it with one (``ErrorKind.MISUSE``) and change nothing (ATOMIC), whatever the rest of
the call says; argument checks come before any allocation, so a malformed call that would also
run out of blocks is still misuse.

The contract (:meth:`Malformed.misuse`): the wrapped call's own contract first (the program
must have been allowed to make it), then the argument's type. Replacing an argument the target
never reads, or by a value that is in fact well-formed, is not misuse but out of contract
(:class:`NotValidated`): the naive allocator ignores the ids and time of
``mark_blocks_as_accessed`` and the ids of prefix queries, and ``get_computed_block_ids``
never reads the id it skips.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from models.core.invariants import Invariant
from models.families.v0.invariants import Family
from models.families.v0.ops.base import Arg, Op, Out
from models.families.v0.ops.hashing import HashRecompute
from models.families.v0.ops.queries import ComputedBlockIds
from models.families.v0.ops.values import JSON, Dev
from models.families.v0.request_keys import KEY_ARGUMENTS, key_misuse

if TYPE_CHECKING:
    from models.families.v0.allocator_model import Model


class NotValidated(Exception):
    """The replaced argument is not one the target must validate, or the value is valid."""


@dataclass(frozen=True, slots=True)
class Malformed(Op):
    """``call`` with its argument ``argument`` (a field name of ``call``) replaced by the
    literal ``bad``: a value of the wrong type or range (``None``, ``"x"``, ``1.5``, ``True``,
    ``-1``, ``2**64``, a list of strs where token ids are expected, ...). Lists are kept as
    tuples so the operation stays hashable; the call plan passes them as lists.

    The contract (see the module): a typed misuse error and an unchanged allocator."""

    kind: ClassVar[str] = "malformed"
    # bad input must be refused and leave no trace
    misuse_family: ClassVar[Invariant] = Family.ATOMIC
    call: Op
    argument: str
    bad: JSON

    def misuse(self, m: Model) -> str | None:
        if isinstance(self.call, Malformed):
            raise Out("a malformed call of a malformed call")
        self.call.misuse(m)
        try:
            return malformed_misuse(m, self)
        except NotValidated as why:
            raise Out(str(why)) from None


# --------------------------------------------------------------------------- content hash
# ``hash_block_tokens``' arguments (``HashRecompute.malformed``).


def _hash_well_formed(call: Op, arg: Arg, bad: JSON) -> bool:
    """Valid for ``call`` (any first flag, when it is not a ``HashRecompute``)."""
    first = call.is_first_block if isinstance(call, HashRecompute) else None
    if arg is Arg.FIRST_FLAG:
        return type(bad) is bool and first in (None, bad)
    if arg is Arg.PREV_HASH:
        return (first is not False and bad is None) or (first is not True
                                                        and isinstance(bad, int))
    return isinstance(bad, tuple) and all(isinstance(t, int) for t in bad)
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
        if isinstance(op.call, ComputedBlockIds) and op.call.skip_last:
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
    checked ``op.call`` itself against the contract). The argument's type is the one the
    call's class declares (``Op.malformed``, its own: subclasses do not inherit it)."""
    call = op.call
    if op.argument in KEY_ARGUMENTS:  # request keys: the key builder's arguments
        why = key_misuse(m, op)
        if why is None:
            raise NotValidated(f"{call.kind}: {op.argument}={op.bad!r} is not the target's "
                               f"to refuse (no key builder of its own, no key, or valid)")
        return why
    entry = vars(type(call)).get("malformed", {}).get(op.argument)
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
