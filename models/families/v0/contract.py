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

from models.families.v0.allocator_model import Model
from models.families.v0.ops.base import Op, Out


class OutOfContract(Exception):
    """The program left the contract; the target cannot be blamed for what follows."""


class Inconclusive(OutOfContract):
    """The model's search over unobservable choices was pruned and no branch survived: no
    false alarm is raised, the example is discarded."""


def misuse_or_out(m: Model, op: Op) -> str | None:
    """The misuse in ``op`` (None if it is valid; ``Op.misuse``, the operation's own
    contract); raises :class:`OutOfContract`."""
    try:
        return op.misuse(m)
    except Out as why:
        raise OutOfContract(f"{op.kind}: {why}") from None


def shortfall(m: Model, op: Op) -> bool:
    """Whether the (valid) operation needs more free ids than its device has
    (``Op.cost``)."""
    need, dev = op.cost(m)
    return need > m.pools[dev].free
