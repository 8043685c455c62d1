"""The CPU tier's load/store spec (upstream ``vllm/v1/kv_offload/cpu/common.py``)."""

from __future__ import annotations

from collections.abc import Iterable

from prefixcache.v1.kv_offload.base import LoadStoreSpec

__all__ = ["CPULoadStoreSpec"]


class CPULoadStoreSpec(LoadStoreSpec):
    """Chunk indices into the CPU cache, in the order of the keys of the call."""

    __slots__ = ("block_ids",)

    def __init__(self, block_ids: Iterable[int]) -> None:
        self.block_ids: tuple[int, ...] = tuple(block_ids)

    @property
    def chunk_ids(self) -> tuple[int, ...]:
        return self.block_ids

    def __repr__(self) -> str:
        return f"CPULoadStoreSpec({list(self.block_ids)})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CPULoadStoreSpec) and other.block_ids == self.block_ids

    def __hash__(self) -> int:
        return hash(self.block_ids)
