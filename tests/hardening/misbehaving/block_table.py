"""``BlockTable`` for the misbehaving targets (the adapter looks for ``block_table`` next to the
allocator's package): the bundled table, except that ``physical_block_ids`` is a generator when
its allocator's fault says so."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prefixcache.block_table import BlockTable as _BundledTable


class BlockTable(_BundledTable):
    @property
    def physical_block_ids(self) -> Any:
        ids: list[int] = super().physical_block_ids
        if getattr(self._allocator, "fault", "") == "physical_ids_generator":
            return _generate(ids)
        return ids


def _generate(ids: list[int]) -> Iterator[int]:
    yield from ids


__all__ = ["BlockTable"]
