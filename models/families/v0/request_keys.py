"""The contract for malformed request keys: the arguments of the target's key builder
(``make_extra_hash(lora_id=, cache_salt=, mm_hashes=)``), named ``extra_hash.<field>`` in a
:class:`~models.families.v0.ops.malformed.Malformed` call of an operation that renders an
:class:`~models.families.v0.ops.values.ExtraKey`.

A well-formed LoRA id is an int (never a bool: ``True`` is not adapter 1) or ``None``; a salt is a
``str``, ``bytes`` or ``None``; multimodal hashes are a sequence (never one string, which would
be a sequence of one-character hashes) of ints (never bools), strs or bytes. Anything else is
misuse: a target whose key builder is its own (``Capabilities.key_builder``) and that claims
typed errors must refuse it with one, before anything is allocated (ATOMIC). vLLM 0.8's key is
the engine's ``Sequence.extra_hash``, which the adapter stands in for: nothing of the target's
to misuse.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

from models.families.v0.ops.allocate import AllocateImmutable, AllocateImmutableChain
from models.families.v0.ops.base import Op
from models.families.v0.ops.tables import TableAllocate
from models.families.v0.ops.values import JSON, ExtraKey

if TYPE_CHECKING:
    from models.families.v0.allocator_model import Model
    from models.families.v0.ops.malformed import Malformed


class KeyArg(enum.Enum):
    """What a well-formed value of a key builder argument is."""

    LORA_ID = "an int (not a bool) or None"
    CACHE_SALT = "a str, bytes or None"
    MM_HASHES = "a sequence (not one string) of int (not bool), str or bytes hashes"


#: The key builder's validated arguments, as ``Malformed.argument`` names them.
KEY_ARGUMENTS: dict[str, KeyArg] = {
    "extra_hash.lora_id": KeyArg.LORA_ID,
    "extra_hash.cache_salt": KeyArg.CACHE_SALT,
    "extra_hash.mm_hashes": KeyArg.MM_HASHES,
}

#: The operations whose ``extra_hash`` is rendered by one key builder call.
KEY_CALLS: tuple[type[Op], ...] = (AllocateImmutable, AllocateImmutableChain, TableAllocate)


def _hash_item(value: JSON) -> bool:
    return type(value) in (int, str, bytes)


def well_formed(arg: KeyArg, bad: JSON) -> bool:
    """Whether ``bad`` is a valid value of ``arg`` (JSON literals: lists are tuples)."""
    if arg is KeyArg.LORA_ID:
        return bad is None or type(bad) is int
    if arg is KeyArg.CACHE_SALT:
        return bad is None or type(bad) in (str, bytes)
    return isinstance(bad, tuple) and all(map(_hash_item, bad))


def bad_values(arg: KeyArg) -> tuple[JSON, ...]:
    """Typical malformed values: bools where ints are meant, numbers where strings are, one
    string or a number where a sequence of hashes is, sequences with a bool, float, None or
    list item (``mm_hashes=None`` is no multimodal input, not misuse)."""
    return {
        KeyArg.LORA_ID: (True, False, "1", 1.5),
        KeyArg.CACHE_SALT: (5, True, 1.5, ("a",)),
        KeyArg.MM_HASHES: ("ab", 7, (True,), (1.5,), (None,), (("a",),), (5, False)),
    }[arg]


def key_misuse(m: Model, op: Malformed) -> str | None:
    """Why ``op`` (a malformed key builder argument) is misuse, or None when it is not one
    the target must refuse (no key builder of its own, no key to render, or a valid value);
    raises ``KeyError`` when ``op.argument`` is not a key builder argument."""
    arg = KEY_ARGUMENTS[op.argument]
    call = op.call
    if not (m.caps.key_builder and m.caps.extra_keys and m.caps.vllm_api):
        return None
    if not isinstance(call, KEY_CALLS) or not isinstance(getattr(call, "extra_hash", None),
                                                         ExtraKey):
        return None
    if well_formed(arg, op.bad):
        return None
    return f"{call.kind} with {op.argument}={op.bad!r}, not {arg.value}"
