"""The fastest any allocator of this API could run a compiled trace in this interpreter.

The trace's compiled code (``benchmarks.compiled``) is executed against stand-ins instead of a
real allocator:

- ``calls``: every method returns at once (``fork`` a new stand-in, ``swap`` an empty
  mapping). What is left is the cost of the calls themselves: evaluating the arguments (the
  token lists), the method lookups and the frames. No allocator, however it is written, runs
  the trace in less.
- ``calls + keys``: the same, plus the one piece of work the prefix-caching contract makes
  unavoidable: each block that fills gets its content key, chained through its prefix, with
  the bundled allocator's collision-resistant hash (a forked table keeps its parent's partial
  block and chain). Nothing is cached, counted or looked up.

vLLM's time over a floor's time bounds the speedup over vLLM that any allocator keeping that
floor's work could reach; the bundled allocator's time over the floor says how much of its
time is above the floor.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from benchmarks.compiled import CompiledProgram
from prefixcache.hashing import hash_block_tokens
from prefixcache.utils import Device

__all__ = ["FLOORS", "floor_env"]


class _Allocator:
    """Accepts every call the compiled trace makes, and does nothing."""

    def clear_copy_on_writes(self) -> list[tuple[int, int]]:
        return []

    def mark_blocks_as_computed(self, block_ids: Sequence[int]) -> None:
        return None

    def mark_blocks_as_accessed(self, block_ids: Sequence[int], now: float) -> None:
        return None

    def get_num_blocks_touched(self, blocks: Sequence[Any], device: Device,
                               num_lookahead_slots: int = 0) -> int:
        return 0

    def get_num_free_blocks(self, device: Device) -> int:
        return 0

    def swap(self, blocks: Sequence[Any], src: Device, dst: Device) -> dict[int, int]:
        return {}

    def get_physical_block_id(self, device: Device, block_id: int) -> int:
        return block_id


class _Table:
    """A block table that keeps nothing."""

    def __init__(self, block_size: int, block_allocator: Any) -> None:
        self._block_size = block_size

    def allocate(self, token_ids: list[int], device: Device = Device.GPU,
                 extra_hash: int | None = None) -> None:
        return None

    def append_token_ids(self, token_ids: list[int], num_lookahead_slots: int = 0,
                         extra_hash: int | None = None) -> None:
        return None

    def fork(self) -> _Table:
        return self.__class__(self._block_size, None)

    def free(self) -> None:
        return None

    def update(self, blocks: Sequence[Any]) -> None:
        return None

    @property
    def physical_block_ids(self) -> list[int]:
        return []

    @property
    def blocks(self) -> list[Any]:
        return []


class _KeyingTable(_Table):
    """A block table that only computes each full block's chained content key."""

    def __init__(self, block_size: int, block_allocator: Any) -> None:
        super().__init__(block_size, block_allocator)
        self._partial: list[int] = []
        self._prev: int | None = None
        self._extra: int | None = None

    def allocate(self, token_ids: list[int], device: Device = Device.GPU,
                 extra_hash: int | None = None) -> None:
        self._extra = extra_hash
        self._add(token_ids)

    def append_token_ids(self, token_ids: list[int], num_lookahead_slots: int = 0,
                         extra_hash: int | None = None) -> None:
        self._add(token_ids)

    def _add(self, token_ids: list[int]) -> None:
        partial = self._partial
        partial.extend(token_ids)
        size = self._block_size
        while len(partial) >= size:
            self._prev = hash_block_tokens(self._prev is None, self._prev, partial[:size],
                                           self._extra)
            del partial[:size]

    def fork(self) -> _KeyingTable:
        child = _KeyingTable(self._block_size, None)
        child._partial = list(self._partial)
        child._prev, child._extra = self._prev, self._extra
        return child


def floor_env(table: type[_Table]) -> Callable[[], dict[str, Any]]:
    """A ``fresh_env`` for :meth:`CompiledProgram.run_plain`: the stand-ins under the names
    the compiled code uses."""
    def fresh() -> dict[str, Any]:
        return {"alloc": _Allocator(), "Device": Device, "BlockTable": table}
    return fresh


#: Name -> table stand-in, cheapest first.
FLOORS: dict[str, type[_Table]] = {"calls": _Table, "calls + keys": _KeyingTable}


def measure(program: CompiledProgram, repeats: int) -> dict[str, float]:
    """Best-of-``repeats`` CPU seconds of ``program`` against each floor."""
    return {name: min(program.run_plain(env=floor_env(table)()) for _ in range(repeats))
            for name, table in FLOORS.items()}
