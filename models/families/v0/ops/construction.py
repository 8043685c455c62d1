"""The construction contract (:class:`~models.families.v0.operations.Construct`;
docs/API.md §4 and §5).

A valid construction builds an allocator over explicit block ids (any order, any gaps, any ids
in ``[0, 2**64)``) that then shows, per device:

- total and free counts equal to the number of its ids (FREE);
- ``all_block_ids`` equal to the set given, both devices' together (LEAK);
- ``get_physical_block_id`` of an id equal to its rank among its device's ids in sorted order,
  whatever order they were given in (SWAP: the block manager turns swap mappings into
  physical ids with it);
- mutable allocations handing out exactly each device's ids, in any order (the contract lets a
  target pick any free id; upstream's free deque keeps the given order, which is not required),
  and then a free count of 0 (LEAK for the ids, FREE for the count).

A constructor argument replaced by a value of the wrong type or range is misuse: a target
with typed errors must refuse it with one (``ErrorKind.MISUSE``). That covers block ids that
are not ``num_blocks`` distinct ints in range (or not a list at all), a bad count or block size,
an eviction policy that is not an ``EvictionPolicy`` member (``make_evictor`` refuses it), a
``hash_function`` that is not callable (an extension: only for targets that take it), CPU and
GPU allocators sharing ids or being the same object, and an ``allocator_type`` other than
``"naive"`` and ``"prefix_caching"`` for ``CpuGpuBlockAllocator.create``. The program's own
allocator is never touched, so a refusal changes nothing by construction (ATOMIC still checks).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from models.core.invariants import Invariant
from models.families.v0.invariants import Family
from models.families.v0.ops.base import Op, Out
from models.families.v0.ops.values import JSON, Dev

if TYPE_CHECKING:
    from models.families.v0.allocator_model import Model

F = Family

#: The single-device allocator classes :class:`Construct` builds.
CONSTRUCT_ALLOCATORS: tuple[str, ...] = ("naive", "prefix_caching")

#: Block ids are ints in ``[0, MAX_BLOCK_ID)``.
MAX_BLOCK_ID = 2**64


#: The construction is out of contract (the base construction is invalid, or the replaced
#: argument does not apply or is well-formed).
ConstructOut = Out


@dataclass(frozen=True, slots=True)
class Construct(Op):
    """Build ``allocator`` over ``ids`` with the program's block size (``"naive"``:
    ``NaiveBlockAllocator(NaiveBlock, len(ids), block_size, block_ids=ids)``;
    ``"prefix_caching"``: ``PrefixCachingBlockAllocator(len(ids), block_size, block_ids=ids)``;
    ids ``0..n-1`` in order without an ``argument``: ``block_ids`` left to its default);
    with ``devices``, a second one of the same class over ``cpu_ids`` and both wrapped in
    ``CpuGpuBlockAllocator(cpu_block_allocator=cpu, gpu_block_allocator=gpu)``. Then read it
    back, per device (GPU first): total and free counts, ``all_block_ids``,
    ``get_physical_block_id`` of each id, the ids of as many mutable allocations as it has ids,
    and the free count after. Value: ``{"total": [..], "free": [..], "all": sorted [..],
    "physical": [..], "handed": [..], "free_after": [..]}``.

    ``argument`` (not ``""``) names the constructor argument replaced by ``bad``:
    ``block_ids``, ``num_blocks``, ``block_size``, ``eviction_policy``, ``hash_function`` (of
    the GPU allocator), ``cpu_block_ids``, ``cpu_block_allocator`` (``bad`` must be
    ``"gpu_block_allocator"``: the GPU allocator passed as both) or ``allocator_type``
    (``CpuGpuBlockAllocator.create(bad, len(ids), len(cpu_ids), block_size)``). Then only the
    constructors run.

    ``create``: built instead by ``CpuGpuBlockAllocator.create(allocator,
    len(ids), len(cpu_ids), block_size)``, which numbers GPU ids ``0..G-1`` and CPU ids
    ``G..G+C-1`` (docs/API.md §5): so it needs ``devices``, ``ids == range(G)``, ``cpu_ids ==
    range(G, G+C)`` and no ``argument``; the read-outs are the same."""

    kind: ClassVar[str] = "construct"
    misuse_family: ClassVar[Invariant] = Family.ATOMIC  # a malformed constructor argument accepted
    mutates: ClassVar[bool] = False
    allocator: str
    ids: tuple[int, ...]
    devices: bool = False
    cpu_ids: tuple[int, ...] = ()
    argument: str = ""
    bad: JSON = None
    create: bool = False  # built by ``CpuGpuBlockAllocator.create``

    def misuse(self, m: Model) -> str | None:
        return construct_misuse(self)

    def step(self, m: Model) -> None:
        construct(m, self)


def valid_ids(ids: JSON) -> bool:
    """A tuple of distinct plain ints in ``[0, 2**64)``."""
    return isinstance(ids, tuple) and all(
        type(i) is int and 0 <= i < MAX_BLOCK_ID for i in ids) and len(set(ids)) == len(ids)


def _disjoint(op: Construct, cpu_ids: JSON) -> bool:
    return not set(op.ids) & set(cpu_ids)


#: What a well-formed value of each replaceable argument is, and which constructions it
#: applies to (``None``: every one).
ARGUMENTS: dict[str, tuple[str, str | None]] = {
    "block_ids": ("a list of num_blocks distinct ints in [0, 2**64)", None),
    "num_blocks": ("a non-negative int equal to the number of block ids", None),
    "block_size": ("a positive int", None),
    "eviction_policy": ("an EvictionPolicy member", "prefix_caching"),
    "hash_function": ("a callable or None", "prefix_caching"),
    "cpu_block_ids": ("block ids disjoint from the GPU allocator's", "devices"),
    "cpu_block_allocator": ("another allocator than the GPU's", "devices"),
    "allocator_type": ('"naive" or "prefix_caching"', None),
}


def _create_numbering(op: Construct) -> bool:
    """``op`` may be built by ``create``: both devices, ids numbered as ``create`` numbers
    them (GPU ``0..G-1``, CPU ``G..G+C-1``; docs/API.md §5), no malformed argument."""
    g = len(op.ids)
    return (op.devices and not op.argument and op.ids == tuple(range(g))
            and op.cpu_ids == tuple(range(g, g + len(op.cpu_ids))))


def well_formed(op: Construct) -> bool:
    """Whether ``op.bad`` is a valid value of ``op.argument`` (a literal is never an
    ``EvictionPolicy`` member, an allocator or a callable)."""
    bad, n = op.bad, len(op.ids)
    checks: dict[str, Callable[[], bool]] = {
        "block_ids": lambda: bad is None or (valid_ids(bad) and len(bad) == n),
        "num_blocks": lambda: type(bad) is int and bad == n,
        "block_size": lambda: type(bad) is int and bad > 0,
        "eviction_policy": lambda: False,
        "hash_function": lambda: bad is None,
        "cpu_block_ids": lambda: (bad is None and _disjoint(op, range(len(op.cpu_ids))))
        or (valid_ids(bad) and len(bad) == len(op.cpu_ids) and _disjoint(op, bad)),
        "cpu_block_allocator": lambda: False,
        "allocator_type": lambda: bad in CONSTRUCT_ALLOCATORS,
    }
    return checks[op.argument]()


def construct_misuse(op: Construct) -> str | None:
    """Why ``op`` is misuse (None: a valid construction); raises :class:`ConstructOut`."""
    if op.allocator not in CONSTRUCT_ALLOCATORS:
        raise ConstructOut(f"unknown allocator class {op.allocator!r}")
    if op.cpu_ids and not op.devices:
        raise ConstructOut("CPU ids without a device-aware allocator")
    if not valid_ids(op.ids) or not valid_ids(op.cpu_ids) or not _disjoint(op, op.cpu_ids):
        raise ConstructOut("the construction a malformed argument goes into must be valid: "
                           "distinct ids in range, the devices' disjoint")
    if op.create and not _create_numbering(op):
        raise ConstructOut("create numbers GPU ids 0..G-1 and CPU ids G..G+C-1, devices only, "
                           "no malformed argument")
    if not op.argument:
        return None
    entry = ARGUMENTS.get(op.argument)
    if entry is None:
        raise ConstructOut(f"no constructor argument {op.argument!r}")
    what, applies = entry
    if (applies == "devices" and not op.devices) or (
            applies not in (None, "devices") and applies != op.allocator):
        raise ConstructOut(f"{op.argument} is not an argument of this construction")
    if op.argument == "cpu_block_allocator" and op.bad != "gpu_block_allocator":
        raise ConstructOut("cpu_block_allocator is only ever replaced by the GPU allocator")
    if well_formed(op):
        raise ConstructOut(f"{op.argument}={op.bad!r} is well-formed")
    return f"{op.allocator} constructor with {op.argument}={op.bad!r}, not {what}"


def bad_values(op: Construct, argument: str) -> tuple[JSON, ...]:
    """Typical malformed values of ``argument`` for ``op`` (for generators): duplicate,
    negative, too large, non-int or too few or many ids; wrong counts, sizes, policies, hash
    functions and allocator types; CPU ids that overlap the GPU's."""
    ids, n = op.ids, len(op.ids)
    first = ids[0] if ids else 0
    if argument == "block_ids":
        return ((first,) * 2 + ids[2:] if n >= 2 else (first, first), (*ids[:-1], -1),
                (*ids[:-1], MAX_BLOCK_ID), (*ids, MAX_BLOCK_ID - 1) if MAX_BLOCK_ID - 1
                not in ids else (*ids, 0), ids[:-1] if ids else (0,),
                (*ids[:-1], "x"), (*ids[:-1], True), (*ids[:-1], 1.5), "ab", 5, 1.5)
    if argument == "num_blocks":
        return (-1, True, 1.5, "1", n + 1, *((n - 1,) if n else ()))
    if argument == "block_size":
        return (0, -1, True, 1.5, "4")
    if argument == "eviction_policy":
        return ("LRU", None, 0, "FIFO")
    if argument == "hash_function":
        return (5, "hash", (1,))
    if argument == "cpu_block_ids":
        return tuple((*op.cpu_ids[:-1], i) for i in ids[:2]) if op.cpu_ids else ()
    if argument == "cpu_block_allocator":
        return ("gpu_block_allocator",)
    return ("x", "Naive", "", None, 0, "prefix-caching")


def _expected(op: Construct) -> dict[str, list[int]]:
    devices = [op.ids, op.cpu_ids] if op.devices else [op.ids]
    return {
        "total": [len(ids) for ids in devices],
        "free": [len(ids) for ids in devices],
        "all": sorted(i for ids in devices for i in ids),
        "physical": [sorted(ids).index(i) for ids in devices for i in ids],
        "handed": [i for ids in devices for i in ids],
        "free_after": [0 for _ in devices],
    }


#: The family of each read-out that disagrees with the model.
_FAMILY = {"total": F.FREE, "free": F.FREE, "all": F.LEAK, "physical": F.SWAP,
           "handed": F.LEAK, "free_after": F.FREE}
_WHAT = {
    "total": "get_num_total_blocks per device",
    "free": "get_num_free_blocks of a fresh allocator",
    "all": "all_block_ids equals the ids given",
    "physical": "get_physical_block_id: each id's rank among its device's ids",
    "handed": "mutable allocations hand out each device's ids given (any order)",
    "free_after": "get_num_free_blocks once every id is handed out",
}


def construct(m: Model, op: Construct) -> None:
    """Judge the read-outs of a valid construction (the module docstring)."""
    got = m.c.outcome.value
    want = _expected(op)
    if not isinstance(got, dict) or set(got) != set(want):
        m.c.flag(F.FREE, "construction read-outs missing", observed=got)
        return
    sizes = [len(ids) for ids in ([op.ids, op.cpu_ids] if op.devices else [op.ids])]
    for key, expected in want.items():
        if got[key] != expected and (key != "handed" or _per_device(got[key], sizes)
                                     != _per_device(expected, sizes)):
            where = Dev.GPU.value if not op.devices else "both devices"
            where += ", built by create" if op.create else ""
            m.c.flag(_FAMILY[key], f"{_WHAT[key]} ({op.allocator}, {where}, ids {list(op.ids)}"
                     f"{f' + {list(op.cpu_ids)}' if op.devices else ''})", expected=expected,
                     observed=got[key])


def _per_device(handed: object, sizes: list[int]) -> object:
    """The ids handed out, as a sorted list per device (the order within one is free)."""
    if not isinstance(handed, list) or len(handed) != sum(sizes) \
            or not all(isinstance(i, int) for i in handed):
        return handed
    out: list[list[int]] = []
    start = 0
    for n in sizes:
        out.append(sorted(handed[start:start + n]))
        start += n
    return out
