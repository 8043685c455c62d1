"""Builtin exception classes docs/API.md pins for some errors.

Engines catch these by builtin class (``except KeyError`` around a device lookup, ``except
ValueError`` around ``evict``), so a target's own typed error for one of these cases must be an
instance of the pinned builtin: a subclass is fine (ours all are), a sibling is not.

- ``NoFreeBlocksError`` subclasses ``ValueError`` (docs/API.md §4), wherever it is raised.
- By-device calls given a device that is not a ``Device`` raise ``KeyError`` (docs/API.md §5).
- ``mark_blocks_as_accessed`` of a free id raises ``ValueError``, of an id the GPU allocator
  does not own ``KeyError`` (docs/API.md §4.3).
- The evictor (docs/API.md §6): ``update`` of a non-candidate ``KeyError``; ``remove`` of one and
  ``evict`` when empty ``ValueError``.
- Writes to the null block raise ``ValueError`` (docs/API.md §3.4); forking it is not pinned.
- A double free (``free`` of a block handle already freed, directly or behind its table)
  raises ``AssertionError`` (docs/API.md §4.2: "a double free raises ``AssertionError``";
  §5: ``free`` needs a block that holds an id).

Any other misuse only has to be typed (:mod:`models.families.v0.ops.malformed`,
:mod:`models.families.v0.contract`).
"""

from __future__ import annotations

import builtins

from models.families.v0 import operations as ops
from models.families.v0.operations import ErrorKind, Op, Outcome

#: Calls whose ``device`` argument docs/API.md routes through a dict of devices (``KeyError``).
_BY_DEVICE: tuple[type[Op], ...] = (ops.AllocateMutable, ops.AllocateImmutable,
                                    ops.AllocateImmutableChain, ops.CountTouched)


def builtin_classes(exc: BaseException) -> tuple[str, ...]:
    """Names of the builtin exception classes ``exc`` is an instance of (most derived first)."""
    return tuple(cls.__name__ for cls in type(exc).__mro__[:-1]  # all but ``object``
                 if cls.__module__ == "builtins" and getattr(builtins, cls.__name__, None) is cls)


def pinned_class(op: Op, error: ErrorKind) -> str | None:
    """The builtin docs/API.md pins for ``op`` failing with ``error`` (a refused misuse or
    ``NoFreeBlocksError``), or None when any typed error will do."""
    if error is ErrorKind.NO_FREE_BLOCKS:
        return "ValueError"
    if error is not ErrorKind.MISUSE:
        return None
    if isinstance(op, ops.Malformed):
        return "KeyError" if op.argument == "device" and isinstance(op.call, _BY_DEVICE) \
            else None
    if isinstance(op, ops.EvictorUpdate):
        return "KeyError"
    if isinstance(op, ops.EvictorRemove | ops.EvictorEvict):
        return "ValueError"
    if isinstance(op, ops.NullBlockMisuse):
        return "ValueError" if op.action in ("append", "set_id") else None
    # their only misuse is freeing a handle that was freed already.
    if isinstance(op, ops.Free | ops.TableFreeBlock):
        return "AssertionError"
    return None


def wrong_class(op: Op, outcome: Outcome, misuse: str | None = None) -> str | None:
    """Why ``outcome``'s error is not of the class docs/API.md pins for it, or None.

    ``misuse``: the contract's reason when the call is misuse (``MarkStaleIds`` pins by it:
    a free id or a CPU id)."""
    error = outcome.error
    if error is None or not outcome.builtins:  # no error, or a target that does not say
        return None
    want = pinned_class(op, error)
    if isinstance(op, ops.MarkStaleIds) and error is ErrorKind.MISUSE and misuse is not None:
        want = "ValueError" if " free id " in misuse else "KeyError" if " CPU id " in misuse \
            else None
    if want is None or want in outcome.builtins:
        return None
    return (f"{op.kind} raised {outcome.detail or error.value}, which is not a {want} as "
            f"docs/API.md specifies (builtin bases: {', '.join(outcome.builtins)})")
