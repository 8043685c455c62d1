"""One step of a program against a target and a model, for a family's executor: record,
apply, check, attribute.

An operation is recorded, applied to the target and the model, and the whole observable state
is checked. A :class:`~models.core.invariants.Violation` raised by either leaves with the
program so far (JSON, replayable) as a note and the failing operation and index attached; any
other exception the target raises inside a call (:func:`guarded`) is a ``CRASH`` violation
naming the call. A step that outlives the target's per-step time limit
(:class:`~properties.core.watchdog.Watchdog`) is a ``TARGET`` violation (a
:class:`~properties.core.watchdog.Hang`), never a killed process.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from models.core.invariants import Invariants, Violation
from properties.core.watchdog import Hang, StepTimeout, Watchdog

__all__ = ["ProgramExecutor", "guarded"]

OpT = TypeVar("OpT")


def guarded(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``; a non-``Violation`` exception becomes a ``CRASH`` violation."""
    try:
        return fn(*args, **kwargs)
    except Violation:
        raise
    except Exception as exc:
        raise Violation(Invariants.CRASH, f"{getattr(fn, '__name__', fn)} raised "
                        f"{type(exc).__name__}: {exc}") from exc


class ProgramExecutor(Generic[OpT]):
    """The step protocol: subclasses give ``_apply`` (one operation on target and model),
    ``check`` (the whole state) and ``_program_json`` (the program as JSON rows)."""

    program: list[OpT]

    def __init__(self, step_timeout: float | None = None) -> None:
        self.program = []
        self.watchdog = Watchdog(step_timeout)

    def step(self, op: OpT) -> Any:
        """Apply ``op``, then check the state; a violation carries the program so far."""
        self.program.append(op)
        try:
            try:
                self.watchdog.arm()
                try:
                    result = self._apply(op)
                    self.check()
                finally:
                    self.watchdog.disarm()
            except StepTimeout:
                hung = True
            else:
                hung = False
            if hung:
                raise Hang(Invariants.TARGET, f"step {len(self.program) - 1} "
                                f"{getattr(op, 'kind', op)} exceeded "
                                f"{self.watchdog.seconds:g} s (a hang)")
        except Violation as v:
            v.add_note("program: " + json.dumps(self._program_json(self.program)))
            raise v.at(op, len(self.program) - 1) from None
        return result

    def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return guarded(fn, *args, **kwargs)

    def _apply(self, op: OpT) -> Any:
        raise NotImplementedError

    def check(self) -> None:
        raise NotImplementedError

    def _program_json(self, program: list[OpT]) -> list[dict[str, Any]]:
        raise NotImplementedError
