"""The request-to-token pool (``sglang.srt.mem_cache.memory_pool.ReqToTokenPool``): ``size``
rows of ``max_context_len`` KV slot ids, one row per running request, lists of ints.

Rows are numbered 1..size (row 0 is upstream's padding row, never handed out). ``alloc(reqs)``
binds a free row to each request without one (None, nothing taken, when too few are free);
``free(req)`` gives its row back. Misuse raises a typed error before any change.
"""

from __future__ import annotations

from typing import Any

from prefixcache.sglang.errors import InvalidArgumentError, RequestStateError

__all__ = ["ReqToTokenPool"]


class ReqToTokenPool:
    """``ReqToTokenPool(size, max_context_len, device="cpu", enable_memory_saver=False)``."""

    def __init__(self, size: int, max_context_len: int, device: str = "cpu",
                 enable_memory_saver: bool = False) -> None:
        if not isinstance(size, int) or size < 1 or not isinstance(max_context_len, int) \
                or max_context_len < 1:
            raise InvalidArgumentError(f"a pool of {size!r} rows of {max_context_len!r} slots")
        self.size = size
        self.max_context_len = max_context_len
        self.device = device
        self.req_to_token: list[list[int]] = [[0] * max_context_len for _ in range(size + 1)]
        self.free_slots = list(range(1, size + 1))

    def available_size(self) -> int:
        return len(self.free_slots)

    def alloc(self, reqs: list[Any]) -> list[int] | None:
        """A row for each request that has none (a continuing one keeps its own)."""
        new = [r for r in reqs if r.kv.req_pool_idx is None]
        if len(new) > len(self.free_slots):
            return None
        for req in new:
            req.kv.req_pool_idx = self.free_slots.pop()
        return [r.kv.req_pool_idx for r in reqs]

    def write(self, indices: tuple[int, slice], values: list[int]) -> None:
        """``req_to_token[row, positions] = values``."""
        row, where = indices
        self._check_row(row)
        span = range(*where.indices(self.max_context_len))
        if len(span) != len(values):
            raise InvalidArgumentError(f"{len(values)} values for {len(span)} positions")
        self.req_to_token[row][where] = list(values)

    def free(self, req: Any) -> None:
        row = req.kv.req_pool_idx
        if row is None:
            raise RequestStateError(f"{req!r} holds no row")
        self._check_row(row)
        self.free_slots.append(row)
        req.kv.req_pool_idx = None

    def clear(self) -> None:
        self.free_slots = list(range(1, self.size + 1))

    def _check_row(self, row: int) -> None:
        if not isinstance(row, int) or not 1 <= row <= self.size or row in self.free_slots:
            raise RequestStateError(f"row {row!r} is not handed out")
