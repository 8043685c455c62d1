"""The operation protocol: what every v0 operation class holds in one place.

An operation is a frozen dataclass (its fields are its arguments; ``kind`` names it in JSON
and reports). Besides its fields it says, in its own class:

- ``misuse(m)``: its contract in the model state ``m``: ``None`` if valid, the reason if it is
  misuse (the target must refuse it with a typed error and change nothing), or it raises
  :class:`Out` when the program left the contract (whatever the target does is acceptable).
- ``cost(m)``: the fresh ids a valid call needs and on which device (admission: more than the
  device has free and it must fail with ``NoFreeBlocksError``).
- ``step(m)``: the model step of a valid call that succeeded (``m.c`` is the step's context:
  what the target returned and shows; the step follows its choices and flags what the
  contract forbids).
- ``misuse_family``: the invariant family blamed when a misuse is accepted or refused with the
  wrong error, or a valid call is refused as misuse.
- ``malformed``: the arguments the target validates (``models.families.v0.ops.malformed``).

What the oracle (``models.families.v0.oracle``) reads besides: ``moves_kv``,
``admitted_first``, ``crash_family``, ``records_cows``, ``value_names_ids``, ``computes_kv``
(class attributes) and the hooks ``freed_block``, ``hides_choices`` and ``explain_success``.

The defaults are those of a call with no contract of its own, no cost, nothing to step and
nothing the oracle treats apart.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from models.core.invariants import Invariant
from models.families.v0.invariants import Family
from models.families.v0.ops.values import Dev

if TYPE_CHECKING:
    from models.families.v0.allocator_model import Model


class Out(Exception):
    """The program left the contract (``contract.misuse_or_out`` turns it into
    ``OutOfContract`` prefixed with the operation's kind)."""


class Arg(enum.Enum):
    """What a well-formed value of a validated argument is."""

    TOKENS = "a list of int token ids"
    CHUNKS = "a list of token-id lists"
    DEVICE = "a Device"
    DEVICE_OR_NONE = "a Device or None"
    COUNT = "a non-negative int"
    EXTRA = "an int or None"
    PREV = "a block or None"
    BLOCK = "a block"
    BLOCKS = "a list of blocks"
    GPU_IDS = "a list of GPU block ids"
    LIST = "a list"
    TIME = "a real number a float holds exactly"
    PREV_IDS = "a list no longer than the ids it is extended from"  # stale ids
    # content hash (``hash_block_tokens``; the call is ``HashRecompute``)
    FIRST_FLAG = "a bool, true exactly for a block that starts its chain"
    PREV_HASH = "None for a first block, else an int"
    HASH_TOKENS = "a sequence of int-like token ids"


#: An argument's validation: what a well-formed value is, and whether only the
#: prefix-caching allocator reads it (the naive one ignores it: not malformed there).
ArgSpec = tuple[Arg, bool]


@dataclass(frozen=True, slots=True)
class Op:
    """Base of every operation (see the module docstring)."""

    kind: ClassVar[str] = ""
    mutates: ClassVar[bool] = True
    misuse_family: ClassVar[Invariant] = Family.TABLE
    #: It moves blocks' KV to other ids (a swap): the shadow memory carries it along.
    moves_kv: ClassVar[bool] = False
    #: The target's own admission verdict precedes the call (``Outcome.admitted``).
    admitted_first: ClassVar[bool] = False
    #: Validated arguments of this class itself (subclasses do not inherit them).
    malformed: ClassVar[Mapping[str, ArgSpec]] = {}
    #: Blamed when a valid call that fits crashes (forks: a fork of any length must work).
    crash_family: ClassVar[Invariant] = Family.CRASH
    #: ``Outcome.cows`` are the copy-on-writes the call recorded, judged against the step's
    #: (not for ``ClearCopyOnWrites``: it drains them, and its step judges its value).
    records_cows: ClassVar[bool] = True
    #: Its value is an id the target shows (the null block's): a hint for the step.
    value_names_ids: ClassVar[bool] = False
    #: The batch ran: the KV of the blocks marked computed is now written (shadow memory).
    computes_kv: ClassVar[bool] = False
    #: The allocator call it amounts to, when it reaches one through another entry point
    #: (a table's ``free``, a swap by hand): ``None``, its own kind; ``""``, none at all (a
    #: tracker's bookkeeping). Only to tell defects apart (``properties.core.baseline.canonical``).
    amounts_to: ClassVar[str | None] = None

    def misuse(self, m: Model) -> str | None:
        """``None`` if valid, else why it is misuse; raises :class:`Out` (see the module)."""
        return None

    def cost(self, m: Model) -> tuple[int, Dev]:
        """Fresh ids a valid call needs, and the device it takes them from."""
        return 0, Dev.GPU

    def step(self, m: Model) -> None:
        """Apply a valid, successful call to ``m`` and judge what the target shows."""

    def freed_block(self) -> int | None:
        """The block handle a valid call frees whose id the oracle records once the call
        succeeded in every world (stale ids: ``record_free``), or None."""
        return None

    def hides_choices(self, m: Model) -> bool:
        """Whether this valid, successful call may make a choice the target never shows (the
        oracle then explores every branch: ``models.core.choice``)."""
        return False

    def explain_success(self, m: Model) -> None:
        """A valid call that needs more free ids than there are succeeded: flag on ``m.c``
        what explains it (an allocation served by ids holding other content)."""

