"""The signature of a deviation: what makes two violations the same defect for ``--all``, the
deduplicated reports and written xfails entries.

A signature is ``(family, allocator type, operation kind, message template)``:

* the family names the broken invariant;
* the allocator type (the variant of the target): variants of a target are separate
  implementations, so the same symptom in each is two defects (and an entry replays on one);
* the operation kind is where the target's behaviour first departed from the model (the same
  symptom after two different operations comes from different code);
* the template is the violation's message with every number (ids, counts, hashes, step indices,
  token lists of any length) and every memory address replaced by a placeholder: the message
  says what was wrong, the numbers only where, so one defect met in many states is one entry.

One symptom can have several causes (a cache hit on other content after a hash collision, or
after a swap that crossed the pools), so a deviation is a signature *and* a mechanism: the
operation kinds of its shrunk program before the failing one (``properties.core.baseline``). A
violation of a known signature is that deviation again when its own program shrinks to the same
mechanism (``baseline.mechanism_of``); otherwise it is a new one, and its written entry matches
that mechanism exactly (``match.mechanism``), so it absorbs one defect, not every violation
whose history happens to contain those kinds. A deviation's size (``Violation.measures``) is not
part of the signature: an adopted entry records it and refuses a worse one (the ratchet).

:func:`message_regex` turns a message into the regex (for a ``match.message`` rule) that
matches exactly the messages of the same template, so an entry written from a signature covers
that signature and nothing else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from models.core.invariants import Violation

#: A run of numbers separated by commas (a token tuple, a list of ids; a 1-tuple's trailing
#: comma included), or one hex address.
_NUMBER_RE = r"-?\d+(?:\.\d+)?(?:, -?\d+(?:\.\d+)?)*(?:,(?=\)))?"
_NUMBERS = re.compile(r"0x[0-9a-fA-F]+|" + _NUMBER_RE)
_ADDRESS_RE = r"0x[0-9a-fA-F]+"
PLACEHOLDER = "#"


def template(message: str) -> str:
    """``message`` with every number run and address replaced by ``#``."""
    return _NUMBERS.sub(PLACEHOLDER, message)


def message_regex(message: str) -> str:
    """An anchored regex matching exactly the messages whose :func:`template` equals
    ``template(message)``."""
    parts: list[str] = []
    last = 0
    for found in _NUMBERS.finditer(message):
        parts.append(re.escape(message[last:found.start()]))
        parts.append(_ADDRESS_RE if found.group().startswith("0x") else _NUMBER_RE)
        last = found.end()
    parts.append(re.escape(message[last:]))
    return "^" + "".join(parts) + "$"


@dataclass(frozen=True, slots=True, order=True)
class Signature:
    """What identifies a deviation (see the module docstring)."""

    family: str
    allocator_type: str
    op: str  # the operation kind it fired at ("-" for the initial check)
    template: str

    def key(self) -> str:
        """A one-line, stable rendering (dictionary key across processes)."""
        return f"{self.family} | {self.allocator_type} | {self.op} | {self.template}"

    @classmethod
    def from_key(cls, key: str) -> Signature:
        family, allocator_type, op, rest = key.split(" | ", 3)
        return cls(family, allocator_type, op, rest)


def op_kind(violation: Violation) -> str:
    kind = getattr(violation.op, "kind", None)
    return kind if isinstance(kind, str) else "-"


def signature(violation: Violation, allocator_type: str) -> Signature:
    """The signature of ``violation``, raised by a target of ``allocator_type``."""
    return Signature(violation.family.value, allocator_type, op_kind(violation),
                     template(violation.message))
