"""Judging shared by the models of a component driven on its own (the evictor, the refcounter
and copy-on-write tracker).

Per step: misuse fed to a target without typed errors is out of contract; misuse accepted is a
violation of the component's family; misuse refused with a typed error must be of the builtin
class docs/API.md pins (``models.families.v0.error_classes``) and change nothing, so every
later finding of the step is ATOMIC (out of contract for targets without atomicity); a valid
call must succeed and match the model. After the step the target's state is compared with the model.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar, Generic, TypeVar

from models.core.invariants import Invariant, Violation
from models.families.v0 import error_classes
from models.families.v0.capabilities import Capabilities
from models.families.v0.contract import OutOfContract
from models.families.v0.invariants import Family
from models.families.v0.operations import ErrorKind, Op, Outcome

F = Family
S = TypeVar("S")

_CRASHES = (ErrorKind.UNEXPECTED, ErrorKind.ASSERTION)


class ComponentModel(ABC, Generic[S]):
    """A component's model: subclasses say what is misuse, whom to blame, how a valid call
    changes the model and how the target's state ``S`` is compared."""

    #: Names the component in ATOMIC messages ("refused call changed <this>").
    COMPONENT: ClassVar[str]

    def __init__(self, caps: Capabilities) -> None:
        self.caps = caps
        self._found: list[Violation] = []
        self._override: Invariant | None = None

    @abstractmethod
    def misuse(self, op: Op) -> str | None:
        """Why ``op`` is misuse in the current state (None: valid)."""

    @abstractmethod
    def family(self, op: Op) -> Invariant:
        """Who is wrong when ``op``'s misuse is accepted or a valid ``op`` fails."""

    @abstractmethod
    def _apply(self, op: Op, value: object) -> None:
        """A valid ``op`` that succeeded with ``value``: update the model, flag a wrong value."""

    @abstractmethod
    def _compare(self, after: S) -> None:
        """Flag where the target's state differs from the model."""

    def refusal(self, op: Op, error: ErrorKind) -> bool:
        """Whether ``error`` is a proper refusal of misuse ``op`` (a typed misuse error)."""
        return error is ErrorKind.MISUSE

    def tolerated(self, op: Op) -> bool:
        """Whether misuse ``op`` may also succeed (docs/API.md silent); then it is applied."""
        return False

    def comparable(self) -> bool:
        """Whether the target's state can be compared yet."""
        return True

    def step(self, op: Op, outcome: Outcome, after: S | None) -> list[Violation]:
        """Judge one step; the violations found (empty: the model followed the target)."""
        misuse = self.misuse(op)
        if misuse is not None and not self.caps.typed_errors:
            raise OutOfContract(f"{op.kind}: misuse ({misuse}) fed to a target without typed "
                                "errors")
        self._found, self._override = [], None
        err = outcome.error
        if misuse is not None and not (err is None and self.tolerated(op)):
            if err is None:
                self._flag(self.family(op), f"misuse accepted without an error: {misuse}")
            elif self.refusal(op, err):
                if not self.caps.atomic:
                    raise OutOfContract(f"{op.kind}: a target without atomicity refused "
                                        "misuse; its state is no longer known")
                wrong = error_classes.wrong_class(op, outcome, misuse)
                if wrong is not None:  # an engine's ``except`` of the pinned class misses it
                    self._flag(F.CRASH, wrong)
                self._override = F.ATOMIC
            else:
                self._flag(F.CRASH if err in _CRASHES else self.family(op),
                           f"misuse ({misuse}) raised {err.value}, not a typed misuse error: "
                           f"{outcome.detail}")
        elif err is not None:
            self._flag(F.CRASH if err in _CRASHES else self.family(op),
                       f"{op.kind} must succeed, raised {err.value}: {outcome.detail}")
        else:
            self._apply(op, outcome.value)
        if after is not None and self.comparable():
            self._compare(after)
        return self._found

    def _flag(self, family: Invariant, message: str, expected: object = None,
              observed: object = None) -> None:
        if self._override is not None:
            message = f"refused call changed {self.COMPONENT} ({family.value}): {message}"
            family = self._override
        self._found.append(Violation(family, message, expected=expected, observed=observed))
