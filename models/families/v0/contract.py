"""What a program may ask, judged before the target is blamed for anything.

Three verdicts for an operation in the model's current state:

- *out of contract* (:class:`OutOfContract`): the program itself left the contract (a handle
  that never existed, appending to a block that is not the last of its chain, an API the target
  does not have, ...). Whatever the target does is acceptable; generators learn to avoid it.
- *misuse*: the contract says the target must refuse it with a typed error and change nothing
  (double free, over-append, a partial immutable block, ...). Fed only to targets claiming
  ``typed_errors``; for others it is out of contract too.
- *shortfall*: it is valid but needs more free ids than the device has, so it must fail with
  ``NoFreeBlocksError`` (and, for atomic targets, change nothing).
"""

from __future__ import annotations

from models.families.v0 import operations as ops
from models.families.v0.allocator_model import Model
from models.families.v0.malformed import NotValidated, malformed_misuse
from models.families.v0.operations import Op
from models.families.v0.ops import common
from models.families.v0.ops.base import Out
from models.families.v0.window import holds_null


class OutOfContract(Exception):
    """The program left the contract; the target cannot be blamed for what follows."""


class Inconclusive(OutOfContract):
    """The model's search over unobservable choices was pruned and no branch survived: no
    false alarm is raised, the example is discarded."""


_Out = Out
_block, _not_reused, _prefix_intact, _live = common.block, common.not_reused, \
    common.prefix_intact, common.live
_prev, _extra, _api, _full_blocks = common.prev, common.extra, common.api, common.full_blocks


def misuse_or_out(m: Model, op: Op) -> str | None:
    """The misuse in ``op`` (None if it is valid); raises :class:`OutOfContract`."""
    try:
        return _check(m, op)
    except _Out as why:
        raise OutOfContract(f"{op.kind}: {why}") from None


#: The operations whose contract is still judged here, by ``_check``; every other operation
#: holds its own (``Op.misuse``, ``models.families.v0.ops``).
LEGACY: tuple[type[Op], ...] = (
    ops.Malformed, *ops.ENGINE_OPS)


def _check(m: Model, op: Op) -> str | None:
    if not isinstance(op, LEGACY):  # the operation's own contract (models.families.v0.ops)
        return op.misuse(m)
    if isinstance(op, ops.Malformed):  # contract in models.families.v0.malformed
        if isinstance(op.call, ops.Malformed):
            raise _Out("a malformed call of a malformed call")
        _check(m, op.call)
        try:
            return malformed_misuse(m, op)
        except NotValidated as why:
            raise _Out(str(why)) from None
    # freed behind: what a damaged table may still be asked (table_misuse)
    from models.families.v0.table_misuse import FreedOut, applies, freed_behind_misuse
    try:
        if applies(m, op):
            return freed_behind_misuse(m, op)
    except FreedOut as why:
        raise _Out(str(why)) from None
    # end freed behind
    table = getattr(op, "table", None)
    if isinstance(op, ops.ENGINE_OPS) and table in m.tables and holds_null(m.tables[table]):
        # a sequence holds every token, its windowed table only the window's blocks.
        raise _Out("engine-side question about a table whose window dropped blocks")
    if isinstance(op, ops.ENGINE_OPS):  # engine-side ops: contract in models.families.v0.trackers
        from models.families.v0.trackers import engine_check
        return engine_check(m, op)
    raise _Out(f"unknown operation {op.kind}")


def shortfall(m: Model, op: Op) -> bool:
    """Whether the (valid) operation needs more free ids than its device has
    (``Op.cost``)."""
    need, dev = op.cost(m)
    return need > m.pools[dev].free
