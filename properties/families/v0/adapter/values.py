"""Value checkers: what the suite reads back from a target, type-checked.

Every value read back from the target (counts, id lists, the swap mapping, the hit rate, blocks
and their ids, hashes and tokens, tables) goes through a ``checked_*`` helper: a value of the
wrong type raises :class:`Misbehaviour` (one line: the call, what it returned, what the API
says) before the oracle sees it. The common case costs a ``type(...) is`` test per value.
:class:`Unsupported` is the other typed error of the adapter: the target lacks an API.
"""

from __future__ import annotations

import reprlib
from collections.abc import Mapping
from typing import Any


class Unsupported(Exception):
    """The target lacks the API an operation needs (a capability the generator should respect)."""


class Misbehaviour(Exception):
    """The target broke the calling convention rather than an allocator invariant: a value of
    the wrong type, a list it mutated, an exception where the suite only reads. ``kind`` names
    the misbehaviour; ``str()`` is one line naming the call and what was expected."""

    def __init__(self, kind: str, detail: str) -> None:
        self.kind = kind
        self.detail = detail
        super().__init__(f"{kind}: {detail}")


_short = reprlib.Repr()
_short.maxlist = _short.maxtuple = _short.maxdict = _short.maxset = 6
_short.maxstring = _short.maxother = 60


def shown(value: object) -> str:
    """``type repr`` of a value, bounded in length (what a report line shows of it); blocks
    in a list show as ``<block ID>``."""
    try:
        if isinstance(value, list | tuple) and value and not isinstance(value[0], int | list) \
                and hasattr(value[0], "block_id"):
            value = type(value)(_BlockShown(b) for b in value)
        text = _short.repr(value)
    except Exception as exc:  # a repr that raises must not hide the real finding
        text = f"<repr raised {type(exc).__name__}>"
    return f"{type(value).__name__} {text}"


class _BlockShown:
    def __init__(self, block: object) -> None:
        self.block = block

    def __repr__(self) -> str:
        return f"<block {getattr(self.block, 'block_id', '?')!r}>"


def wrong_type(what: str, expected: str, got: object) -> Misbehaviour:
    return Misbehaviour("wrong type", f"{what} returned {shown(got)}, expected {expected}")


def is_int(value: object) -> bool:
    """An ``int`` that is not a ``bool`` (the common case costs one ``type`` check)."""
    return type(value) is int or (isinstance(value, int) and not isinstance(value, bool))


def checked_int(value: Any, what: str) -> int:
    if type(value) is int:
        return value
    if is_int(value):
        return int(value)
    raise wrong_type(what, "int", value)


def checked_opt_int(value: Any, what: str) -> int | None:
    if value is None or type(value) is int:
        return value
    if is_int(value):
        return int(value)
    raise wrong_type(what, "int or None", value)


def checked_ints(value: Any, what: str, item: str = "int") -> list[int]:
    """A ``list`` of ints (a generator, tuple or set is a wrong type: the API says list)."""
    if type(value) is not list:
        raise wrong_type(what, f"list of {item}", value)
    for x in value:
        if not is_int(x):
            raise wrong_type(what, f"list of {item}", value)
    return list(value)


def checked_pairs(value: Any, what: str) -> list[list[int]]:
    """A list of (int, int) pairs, as ``clear_copy_on_writes`` returns."""
    if type(value) is not list:
        raise wrong_type(what, "list of (int, int)", value)
    out = []
    for pair in value:
        if not isinstance(pair, tuple | list) or len(pair) != 2 or not is_int(pair[0]) \
                or not is_int(pair[1]):
            raise wrong_type(what, "list of (int, int)", value)
        out.append([int(pair[0]), int(pair[1])])
    return out


def checked_id_set(value: Any, what: str) -> frozenset[int]:
    """A set of ints, as ``all_block_ids`` returns (a list is a wrong type: the API says a
    frozenset)."""
    if not isinstance(value, frozenset | set) or not all(is_int(x) for x in value):
        raise wrong_type(what, "frozenset of int", value)
    return frozenset(int(x) for x in value)


def checked_mapping(value: Any, what: str) -> list[list[int]]:
    """A ``{int: int}`` mapping, as ``swap`` returns; as ``[[src, dst], ...]``."""
    if not isinstance(value, Mapping):
        raise wrong_type(what, "dict of int -> int", value)
    out = []
    for s, d in value.items():
        if not is_int(s) or not is_int(d):
            raise wrong_type(what, "dict of int -> int", value)
        out.append([int(s), int(d)])
    return out


def checked_number(value: Any, what: str) -> float:
    """A float (an int is accepted: the naive allocator's hit rate is ``-1``)."""
    if isinstance(value, float) or is_int(value):
        return float(value)
    raise wrong_type(what, "float", value)


def checked_bool(value: Any, what: str) -> bool:
    if type(value) is not bool:
        raise wrong_type(what, "bool", value)
    return value


def checked_block(value: Any, what: str) -> Any:
    """A block object: something with ``block_id``, ``token_ids`` and ``content_hash``."""
    if value is None or isinstance(value, int | float | str | bytes | list | tuple | dict) \
            or not hasattr(value, "block_id") or not hasattr(value, "token_ids"):
        raise wrong_type(what, "a block", value)
    return value


def checked_blocks(value: Any, what: str) -> list[Any]:
    if type(value) is not list:
        raise wrong_type(what, "list of blocks", value)
    for b in value:
        checked_block(b, what)
    return value
