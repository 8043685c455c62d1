"""Abstract interfaces: a logical block, a single-device allocator, a device-aware one.

Names and signatures follow the vLLM-v0 / Aphrodite block API (both generations: every
allocate method takes an optional ``extra_hash`` keyword). Methods marked *extension*
are additions of this package used for failure-atomic admission checks; they have
concrete default implementations so third-party subclasses need not provide them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar, Protocol

from prefixcache.errors import NoFreeBlocksError
from prefixcache.utils import Device

__all__ = ["Block", "BlockAllocator", "BlockId", "Device", "DeviceAwareBlockAllocator"]

BlockId = int


class Block(ABC):
    """A logical block: up to ``block_size`` token ids, chained to its predecessor.

    ``block_id`` is the physical id it holds, or ``None``. ``token_ids`` is the internal
    list itself (not a copy); callers must not mutate it.
    """

    __slots__ = ()

    @abstractmethod
    def append_token_ids(self, token_ids: list[int]) -> None:
        """Add tokens; may change ``block_id`` (copy-on-write or promotion)."""

    @property
    @abstractmethod
    def block_id(self) -> int | None: ...

    @block_id.setter
    @abstractmethod
    def block_id(self, value: int | None) -> None: ...

    @property
    @abstractmethod
    def token_ids(self) -> list[int]: ...

    @property
    @abstractmethod
    def num_tokens_total(self) -> int:
        """Tokens in this block and every block before it."""

    @property
    @abstractmethod
    def num_empty_slots(self) -> int: ...

    @property
    @abstractmethod
    def is_full(self) -> bool: ...

    @property
    @abstractmethod
    def prev_block(self) -> Block | None: ...

    @property
    @abstractmethod
    def extra_hash(self) -> int | None:
        """Request-level key folded into the content hash (``None`` if none)."""

    @property
    @abstractmethod
    def computed(self) -> bool: ...

    @computed.setter
    @abstractmethod
    def computed(self, value: bool) -> None: ...

    @property
    @abstractmethod
    def last_accessed(self) -> float: ...

    @last_accessed.setter
    @abstractmethod
    def last_accessed(self, last_accessed_ts: float) -> None: ...

    @property
    @abstractmethod
    def content_hash(self) -> int | None:
        """Key of the whole prefix up to and including this block, once it is full."""

    class Factory(Protocol):
        """Builds a block; the allocators' pools call it."""

        def __call__(
            self,
            prev_block: Block | None,
            token_ids: list[int],
            block_size: int,
            allocator: BlockAllocator,
            block_id: int | None = None,
            computed: bool = False,
            extra_hash: int | None = None,
        ) -> Block: ...


class BlockAllocator(ABC):
    """Allocates physical block ids of one device to logical blocks.

    Every method that takes ``device`` requires it to be ``None``.
    """

    NoFreeBlocksError: ClassVar[type[NoFreeBlocksError]] = NoFreeBlocksError

    @abstractmethod
    def allocate_mutable_block(
        self, prev_block: Block | None, device: Device | None = None, extra_hash: int | None = None
    ) -> Block: ...

    @abstractmethod
    def allocate_immutable_block(
        self,
        prev_block: Block | None,
        token_ids: list[int],
        device: Device | None = None,
        extra_hash: int | None = None,
    ) -> Block: ...

    @abstractmethod
    def allocate_immutable_blocks(
        self,
        prev_block: Block | None,
        block_token_ids: list[list[int]],
        device: Device | None = None,
        extra_hash: int | None = None,
    ) -> list[Block]: ...

    @abstractmethod
    def free(self, block: Block, keep_block_object: bool = False) -> None: ...

    @abstractmethod
    def fork(self, last_block: Block) -> list[Block]: ...

    @abstractmethod
    def get_num_total_blocks(self) -> int: ...

    @abstractmethod
    def get_num_free_blocks(self, device: Device | None = None) -> int: ...

    @abstractmethod
    def get_physical_block_id(self, absolute_id: int) -> int: ...

    @property
    @abstractmethod
    def all_block_ids(self) -> frozenset[int]: ...

    @abstractmethod
    def swap_out(self, blocks: list[Block]) -> None: ...

    @abstractmethod
    def swap_in(self, blocks: list[Block]) -> None: ...

    @abstractmethod
    def clear_copy_on_writes(self) -> list[tuple[int, int]]: ...

    @abstractmethod
    def mark_blocks_as_accessed(self, block_ids: list[int], now: float) -> None: ...

    @abstractmethod
    def mark_blocks_as_computed(self, block_ids: list[int]) -> None: ...

    @abstractmethod
    def get_computed_block_ids(
        self, prev_computed_block_ids: list[int], block_ids: list[int], skip_last_block_id: bool
    ) -> list[int]: ...

    @abstractmethod
    def get_common_computed_block_ids(
        self, computed_seq_block_ids: list[list[int]]
    ) -> list[int]: ...

    @abstractmethod
    def cow_block_if_not_appendable(self, block: Block) -> int: ...

    @abstractmethod
    def promote_to_immutable_block(self, block: Block) -> int: ...

    @abstractmethod
    def get_num_blocks_touched(self, blocks: list[Block], num_lookahead_slots: int = 0) -> int: ...

    @abstractmethod
    def get_num_full_blocks_touched(self, blocks: list[Block]) -> int: ...

    @abstractmethod
    def get_prefix_cache_hit_rate(self) -> float: ...

    @abstractmethod
    def reset_prefix_cache(self) -> bool: ...

    @abstractmethod
    def find_cached_blocks_prefix(self, block_hashes: list[int]) -> list[int]: ...

    # -- extensions -------------------------------------------------------------------

    def get_block_refcount(self, block_id: int) -> int:
        """*Extension.* Current refcount of ``block_id``."""
        raise NotImplementedError

    def get_num_free_blocks_needed(
        self,
        prev_block: Block | None,
        block_token_ids: Sequence[Sequence[int]],
        extra_hash: int | None = None,
    ) -> int:
        """*Extension.* How far ``allocate_immutable_blocks`` with these arguments would
        lower the free count (cache hits on active ids cost nothing)."""
        raise NotImplementedError

    def get_num_free_blocks_needed_for_swap_in(self, blocks: Sequence[Block]) -> int:
        """*Extension.* How far ``swap_in(blocks)`` would lower the free count."""
        raise NotImplementedError


class DeviceAwareBlockAllocator(ABC):
    """Routes block operations to one allocator per device."""

    @abstractmethod
    def allocate_mutable_block(
        self, prev_block: Block | None, device: Device, extra_hash: int | None = None
    ) -> Block: ...

    @abstractmethod
    def allocate_immutable_block(
        self,
        prev_block: Block | None,
        token_ids: list[int],
        device: Device,
        extra_hash: int | None = None,
    ) -> Block: ...

    @abstractmethod
    def allocate_immutable_blocks(
        self,
        prev_block: Block | None,
        block_token_ids: list[list[int]],
        device: Device,
        extra_hash: int | None = None,
    ) -> list[Block]: ...

    @abstractmethod
    def get_num_free_blocks(self, device: Device) -> int: ...

    @abstractmethod
    def get_num_total_blocks(self, device: Device) -> int: ...

    @abstractmethod
    def free(self, block: Block) -> None: ...

    @abstractmethod
    def fork(self, last_block: Block) -> list[Block]: ...

    @property
    @abstractmethod
    def all_block_ids(self) -> frozenset[int]: ...

    @abstractmethod
    def clear_copy_on_writes(self) -> list[tuple[int, int]]: ...

    @abstractmethod
    def mark_blocks_as_accessed(self, block_ids: list[int], now: float) -> None: ...

    @abstractmethod
    def mark_blocks_as_computed(self, block_ids: list[int]) -> None: ...

    @abstractmethod
    def get_computed_block_ids(
        self, prev_computed_block_ids: list[int], block_ids: list[int], skip_last_block_id: bool
    ) -> list[int]: ...

    @abstractmethod
    def get_common_computed_block_ids(
        self, computed_seq_block_ids: list[list[int]]
    ) -> list[int]: ...

    @abstractmethod
    def get_num_blocks_touched(
        self, blocks: list[Block], device: Device, num_lookahead_slots: int = 0
    ) -> int: ...

    @abstractmethod
    def get_num_full_blocks_touched(self, blocks: list[Block], device: Device) -> int: ...

    @abstractmethod
    def swap(
        self, blocks: list[Block], src_device: Device, dst_device: Device
    ) -> dict[int, int]: ...

    @abstractmethod
    def get_physical_block_id(self, device: Device, absolute_id: int) -> int: ...

    @abstractmethod
    def allocate_or_get_null_block(self) -> Block: ...

    @abstractmethod
    def get_prefix_cache_hit_rate(self, device: Device) -> float: ...

    @abstractmethod
    def reset_prefix_cache(self, device: Device | None = None) -> bool: ...

    @abstractmethod
    def find_cached_blocks_prefix(
        self, block_hashes: list[int], device: Device = Device.GPU
    ) -> list[int]: ...

    # -- extensions -------------------------------------------------------------------

    def get_block_refcount(self, block_id: int) -> int:
        """*Extension.* Current refcount of ``block_id`` on whichever device owns it."""
        raise NotImplementedError

    def get_block_device(self, block_id: int) -> Device:
        """*Extension.* The device that owns ``block_id``."""
        raise NotImplementedError

    def get_num_free_blocks_needed(
        self,
        prev_block: Block | None,
        block_token_ids: Sequence[Sequence[int]],
        device: Device,
        extra_hash: int | None = None,
    ) -> int:
        """*Extension.* Free-count drop of ``allocate_immutable_blocks`` on ``device``."""
        raise NotImplementedError

    @property
    def null_block(self) -> Block | None:
        """*Extension.* The null block if one was allocated, else ``None``."""
        return None
