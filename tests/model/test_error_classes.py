"""The builtin error classes docs/API.md pins (``models.families.v0.error_classes``)."""

from __future__ import annotations

import pytest

from models.families.v0 import operations as ops
from models.families.v0.error_classes import builtin_classes, pinned_class, wrong_class
from models.families.v0.operations import ErrorKind, Outcome
from prefixcache.errors import (
    DoubleFreeError,
    InvalidArgumentError,
    NoFreeBlocksError,
    UnknownDeviceError,
)


class _Own(RuntimeError):
    pass


def test_builtin_classes_lists_the_builtins_of_the_mro_only() -> None:
    assert builtin_classes(UnknownDeviceError("x")) == ("KeyError", "LookupError", "Exception",
                                                       "BaseException")
    assert builtin_classes(DoubleFreeError("x"))[:2] == ("ValueError", "AssertionError")
    assert builtin_classes(_Own()) == ("RuntimeError", "Exception", "BaseException")


def _failed(exc: BaseException, kind: ErrorKind) -> Outcome:
    return Outcome(error=kind, detail=f"{type(exc).__name__}: {exc}",
                   builtins=builtin_classes(exc))


MALFORMED_DEVICE = ops.Malformed(ops.AllocateMutable(None, ops.Dev.GPU), "device", None)


@pytest.mark.parametrize(("op", "error", "pinned"), [
    (ops.EvictorUpdate(3, 1.0), ErrorKind.MISUSE, "KeyError"),
    (ops.EvictorRemove(3), ErrorKind.MISUSE, "ValueError"),
    (ops.EvictorEvict(), ErrorKind.MISUSE, "ValueError"),
    (MALFORMED_DEVICE, ErrorKind.MISUSE, "KeyError"),
    (ops.Malformed(ops.AllocateMutable(None, ops.Dev.GPU), "prev", 1), ErrorKind.MISUSE, None),
    (ops.NullBlockMisuse("append"), ErrorKind.MISUSE, "ValueError"),
    (ops.NullBlockMisuse("fork"), ErrorKind.MISUSE, None),
    (ops.AllocateMutable(None, ops.Dev.GPU), ErrorKind.NO_FREE_BLOCKS, "ValueError"),
    (ops.AllocateMutable(None, ops.Dev.GPU), ErrorKind.UNEXPECTED, None),
])
def test_pinned_class(op: ops.Op, error: ErrorKind, pinned: str | None) -> None:
    assert pinned_class(op, error) == pinned


def test_a_sibling_of_the_pinned_builtin_is_wrong_a_subclass_is_right() -> None:
    update = ops.EvictorUpdate(3, 1.0)
    assert wrong_class(update, _failed(KeyError(3), ErrorKind.MISUSE)) is None
    message = wrong_class(update, _failed(InvalidArgumentError("x"), ErrorKind.MISUSE))
    assert message is not None and "not a KeyError" in message
    assert wrong_class(MALFORMED_DEVICE, _failed(UnknownDeviceError("x"),
                                                 ErrorKind.MISUSE)) is None
    alloc = ops.AllocateMutable(None, ops.Dev.GPU)
    assert wrong_class(alloc, _failed(NoFreeBlocksError(), ErrorKind.NO_FREE_BLOCKS)) is None
    assert wrong_class(alloc, _failed(_Own(), ErrorKind.NO_FREE_BLOCKS)) is not None


def test_stale_id_marks_pin_by_the_reason() -> None:
    mark = ops.MarkStaleIds((0,), 1.0)
    free = "mark_blocks_as_accessed of free id 4 (block 0 held it)"
    cpu = "mark_blocks_as_accessed of CPU id 9 (block 0)"
    assert wrong_class(mark, _failed(KeyError(4), ErrorKind.MISUSE), free) is not None
    assert wrong_class(mark, _failed(ValueError(4), ErrorKind.MISUSE), free) is None
    assert wrong_class(mark, _failed(ValueError(9), ErrorKind.MISUSE), cpu) is not None
    assert wrong_class(mark, _failed(KeyError(9), ErrorKind.MISUSE), cpu) is None


def test_no_error_or_no_classes_recorded_is_not_judged() -> None:
    update = ops.EvictorUpdate(3, 1.0)
    assert wrong_class(update, Outcome()) is None
    assert wrong_class(update, Outcome(error=ErrorKind.MISUSE, detail="x")) is None


def test_outcomes_keep_the_classes_through_json() -> None:
    outcome = _failed(UnknownDeviceError("x"), ErrorKind.MISUSE)
    assert ops.outcome_from_json(ops.outcome_to_json(outcome)) == outcome
