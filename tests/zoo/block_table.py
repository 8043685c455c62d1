"""``BlockTable`` for allocators whose class is defined in this package.

WORKAROUND (reported to the lead): ``properties.adapters.FamilyAdapter`` finds ``Device`` in
the module of the allocator's class and ``BlockTable`` in ``<that module's package>.block_table``.
A device-level mutant subclasses ``CpuGpuBlockAllocator`` in ``tests.zoo``, so the adapter looks
here; this module only re-exports the bundled, unmodified table.
"""

from prefixcache.block_table import BlockTable

__all__ = ["BlockTable"]
