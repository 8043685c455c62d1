"""The validated arguments of every operation, for generators: :data:`ARGUMENTS` (each
operation's ``Op.malformed``, collected from the classes) and :func:`bad_values` (typical
malformed values of each type).

The contract itself (what a well-formed value is, when a replaced argument is misuse and when
it is out of contract) is the ``Malformed`` operation's: ``models.families.v0.ops.malformed``.
"""

from __future__ import annotations

from models.families.v0 import operations as ops
from models.families.v0.capabilities import Config
from models.families.v0.operations import JSON, Op
from models.families.v0.ops.base import Arg
from models.families.v0.ops.malformed import NotValidated, malformed_misuse, well_formed

__all__ = ["ARGUMENTS", "Arg", "NotValidated", "bad_values", "malformed_misuse", "well_formed"]


#: The validated arguments, by operation and field; ``True`` in the second place: only the
#: prefix-caching allocator reads the argument (the naive one ignores it). Each operation
#: holds its own (``Op.malformed``).
ARGUMENTS: dict[tuple[type[Op], str], tuple[Arg, bool]] = {
    (cls, name): spec for cls in ops.OPS_BY_KIND.values()
    for name, spec in vars(cls).get("malformed", {}).items()}


# --------------------------------------------------------------------------- content hash
# ``hash_block_tokens``' arguments (``HashRecompute.malformed``).


def _hash_bad_values(arg: Arg, like: JSON) -> tuple[JSON, ...]:
    """``like`` is the call's ``is_first_block`` (None: unknown, only values bad for both)."""
    if arg is Arg.FIRST_FLAG:
        flipped = (not like,) if isinstance(like, bool) else ()
        return (*flipped, None, 1, "x")
    if arg is Arg.PREV_HASH:
        wrong = (0, 7) if like is True else (None,) if like is False else ()
        return (*wrong, "x", 1.5)
    tokens = like if isinstance(like, tuple) and like else (0,)
    return (None, 7, "ab", *(item for item in _bad_items(tokens)
                               if not any(type(t) is bool for t in item)))
# --------------------------------------------------------------------------- end content hash


def bad_values(arg: Arg, config: Config, like: JSON = None) -> tuple[JSON, ...]:
    """Typical malformed values of type ``arg`` (for generators): wrong types, bools where
    ints are meant, out-of-range numbers, containers of the wrong items, and ids outside the
    GPU (a CPU id, one past the last id, ``2**64``, ``-1``) for GPU id lists. Token lists and
    chunks keep the shape of ``like`` (the value they replace) with every item, or only the
    last, malformed, so nothing but the item type is wrong."""
    if arg is Arg.TOKENS:
        return (None, 7, "ab", *_bad_items(like if isinstance(like, tuple) and like else (0,)))
    if arg in (Arg.FIRST_FLAG, Arg.PREV_HASH, Arg.HASH_TOKENS):  # content hash
        return _hash_bad_values(arg, like)
    if arg is Arg.CHUNKS:
        chunks = like if isinstance(like, tuple) and like else ((0,),)
        return (None, 7, "ab", (7,) * len(chunks),
                *((*chunks[:-1], bad) for bad in _bad_items(chunks[-1])))
    ids = (-1, 2**64, config.num_gpu_blocks + config.num_cpu_blocks)
    cpu = (config.num_gpu_blocks,) if config.num_cpu_blocks else ()
    return {
        Arg.DEVICE: (None, "gpu", 0, 1.5, True, (1,)),  # (1,): a list, unhashable
        Arg.DEVICE_OR_NONE: ("gpu", 0, 1.5, True),
        Arg.COUNT: (-1, True, 1.5, "1", None, -(2**64)),
        Arg.EXTRA: ("x", 1.5, True, (1,)),
        Arg.PREV: (0, "x", (), True),
        Arg.BLOCK: (None, 0, "x", ()),
        Arg.BLOCKS: (None, 0, "ab", (0,), (None,)),
        Arg.GPU_IDS: (None, 5, "ab", ("x",), (True,), (1.5,), *((i,) for i in ids + cpu)),
        Arg.LIST: (None, 5, "ab"),
        Arg.TIME: (None, "x", True, 2**53 + 1, (1.0,)),
        Arg.PREV_IDS: (None, 5, "ab", (0,) * (config.num_gpu_blocks + 1)),  # stale ids
    }[arg]


def _bad_items(tokens: tuple[JSON, ...]) -> tuple[JSON, ...]:
    """``tokens`` with every item, then only the last, of a wrong type (str, bool, float,
    list, None)."""
    n = len(tokens)
    every = [("x",) * n, (True,) * n, (1.5,) * n, ((1,),) * n]
    return (*every, *((*tokens[:-1], bad) for bad in (True, None, "1")))
