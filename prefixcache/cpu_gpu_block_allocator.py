"""A device-aware allocator: one single-device allocator per device, routed by device
or by block id, plus swapping between devices and the null block.

GPU ids come first (``0..G-1``), CPU ids after (``G..G+C-1``). Routing is a dict
lookup; ``all_block_ids`` is computed once.
"""

from __future__ import annotations

from collections.abc import Sequence

from prefixcache._validation import (
    check_block,
    check_block_id,
    check_block_size,
    check_count,
    checked_blocks,
)
from prefixcache.errors import (
    DoubleFreeError,
    ForkError,
    ImmutableBlockError,
    InvalidArgumentError,
    InvalidBlockError,
    NoFreeBlocksError,
    SwapError,
    UnknownBlockIdError,
    UnknownDeviceError,
)
from prefixcache.hashing import HashFunction
from prefixcache.interfaces import Block, BlockAllocator, BlockId, DeviceAwareBlockAllocator
from prefixcache.naive_block import NaiveBlock, NaiveBlockAllocator, check_no_duplicate_objects
from prefixcache.prefix_caching_block import PrefixCachingBlock, PrefixCachingBlockAllocator
from prefixcache.utils import Device

__all__ = ["CpuGpuBlockAllocator", "NullBlock"]


class NullBlock(Block):
    """A placeholder for blocks dropped by a sliding window.

    Wraps one real GPU block that is never freed. It cannot take tokens
    (:class:`ImmutableBlockError`) or change id (:class:`InvalidBlockError`); reads are
    forwarded to the wrapped block, except ``num_tokens_total`` (unsupported) and
    ``extra_hash`` (``None``).
    """

    __slots__ = ("_proxy",)

    def __init__(self, proxy: Block) -> None:
        super().__init__()
        self._proxy = proxy

    def append_token_ids(self, token_ids: list[int]) -> None:
        raise ImmutableBlockError("the null block cannot take tokens")

    @property
    def block_id(self) -> int | None:
        return self._proxy.block_id

    @block_id.setter
    def block_id(self, value: int | None) -> None:
        raise InvalidBlockError("the null block's id cannot change")

    @property
    def token_ids(self) -> list[int]:
        return self._proxy.token_ids

    @property
    def num_tokens_total(self) -> int:
        raise NotImplementedError("num_tokens_total is not defined for the null block")

    @property
    def num_empty_slots(self) -> int:
        return self._proxy.num_empty_slots

    @property
    def is_full(self) -> bool:
        return self._proxy.is_full

    @property
    def prev_block(self) -> Block | None:
        return self._proxy.prev_block

    @property
    def extra_hash(self) -> int | None:
        return None

    @property
    def computed(self) -> bool:
        return self._proxy.computed

    @computed.setter
    def computed(self, value: bool) -> None:
        self._proxy.computed = value

    @property
    def last_accessed(self) -> float:
        return self._proxy.last_accessed

    @last_accessed.setter
    def last_accessed(self, last_accessed_ts: float) -> None:
        self._proxy.last_accessed = last_accessed_ts

    @property
    def content_hash(self) -> int | None:
        return self._proxy.content_hash


_SingleDevice = NaiveBlockAllocator | PrefixCachingBlockAllocator


#: Block classes that are certainly not the null block (checked by exact type).
_PLAIN_BLOCKS = frozenset((NaiveBlock, PrefixCachingBlock))


class CpuGpuBlockAllocator(DeviceAwareBlockAllocator):
    """Routes to a GPU and a CPU allocator (naive or prefix-caching, same type).

    By device: allocation, counts, physical ids, touched counts, hit rate (``None`` or
    an unknown device -> :class:`UnknownDeviceError`, a ``KeyError``). By block id:
    ``free`` (the null block is ignored) and ``fork``. Always the GPU: copy-on-write
    records, access/computed marks, computed-id queries.
    """

    @staticmethod
    def create(
        allocator_type: str,
        num_gpu_blocks: int,
        num_cpu_blocks: int,
        block_size: int,
        hash_function: HashFunction | None = None,
    ) -> CpuGpuBlockAllocator:
        """Build both allocators: ``"naive"`` or ``"prefix_caching"`` (else
        :class:`InvalidArgumentError`); ``hash_function`` goes to prefix-caching ones."""
        check_count(num_gpu_blocks, "num_gpu_blocks")
        check_count(num_cpu_blocks, "num_cpu_blocks")
        check_block_size(block_size)
        gpu_ids = range(num_gpu_blocks)
        cpu_ids = range(num_gpu_blocks, num_gpu_blocks + num_cpu_blocks)
        gpu: _SingleDevice
        cpu: _SingleDevice
        if allocator_type == "naive":
            gpu = NaiveBlockAllocator(NaiveBlock, num_gpu_blocks, block_size, block_ids=gpu_ids)
            cpu = NaiveBlockAllocator(NaiveBlock, num_cpu_blocks, block_size, block_ids=cpu_ids)
        elif allocator_type == "prefix_caching":
            gpu = PrefixCachingBlockAllocator(
                num_gpu_blocks, block_size, block_ids=gpu_ids, hash_function=hash_function
            )
            cpu = PrefixCachingBlockAllocator(
                num_cpu_blocks, block_size, block_ids=cpu_ids, hash_function=hash_function
            )
        else:
            raise InvalidArgumentError(f"unknown allocator type {allocator_type!r}")
        return CpuGpuBlockAllocator(cpu_block_allocator=cpu, gpu_block_allocator=gpu)

    def __init__(
        self, cpu_block_allocator: BlockAllocator, gpu_block_allocator: BlockAllocator
    ) -> None:
        cpu_ids = cpu_block_allocator.all_block_ids
        gpu_ids = gpu_block_allocator.all_block_ids
        if cpu_block_allocator is gpu_block_allocator or not cpu_ids.isdisjoint(gpu_ids):
            raise InvalidArgumentError("CPU and GPU allocators must own disjoint block ids")
        self._allocators: dict[Device, BlockAllocator] = {
            Device.CPU: cpu_block_allocator,
            Device.GPU: gpu_block_allocator,
        }
        self._block_ids_to_allocator: dict[BlockId, BlockAllocator] = {}
        self._block_ids_to_device: dict[BlockId, Device] = {}
        for device, allocator in self._allocators.items():
            for block_id in allocator.all_block_ids:
                self._block_ids_to_allocator[block_id] = allocator
                self._block_ids_to_device[block_id] = device
        self._all_block_ids: frozenset[int] = cpu_ids | gpu_ids
        self._gpu_allocator = gpu_block_allocator  # the calls that always go to the GPU
        self._swap_mapping: dict[BlockId, BlockId] = {}
        self._null_block: NullBlock | None = None

    # -- routing ---------------------------------------------------------------------------

    def _allocator_for(self, device: Device | None) -> BlockAllocator:
        allocator = self._allocators.get(device) if isinstance(device, Device) else None
        if allocator is None:
            raise UnknownDeviceError(f"unknown device {device!r}")
        return allocator

    def _allocator_of_id(self, block_id: BlockId) -> BlockAllocator:
        if block_id.__class__ is not int:  # exact ints skip the (bool/float) alias check
            check_block_id(block_id)
        allocator = self._block_ids_to_allocator.get(block_id)
        if allocator is None:
            raise UnknownBlockIdError(f"block id {block_id} belongs to no device")
        return allocator

    # -- allocation ------------------------------------------------------------------------

    def allocate_mutable_block(
        self, prev_block: Block | None, device: Device, extra_hash: int | None = None
    ) -> Block:
        return self._allocator_for(device).allocate_mutable_block(prev_block, extra_hash=extra_hash)

    def allocate_immutable_block(
        self,
        prev_block: Block | None,
        token_ids: list[int],
        device: Device,
        extra_hash: int | None = None,
    ) -> Block:
        return self._allocator_for(device).allocate_immutable_block(
            prev_block, token_ids, extra_hash=extra_hash
        )

    def allocate_immutable_blocks(
        self,
        prev_block: Block | None,
        block_token_ids: list[list[int]],
        device: Device,
        extra_hash: int | None = None,
    ) -> list[Block]:
        return self._allocator_for(device).allocate_immutable_blocks(
            prev_block, block_token_ids, extra_hash=extra_hash
        )

    def allocate_or_get_null_block(self) -> Block:
        """The null block; the first call takes one GPU block that is never freed."""
        if self._null_block is None:
            self._null_block = NullBlock(self.allocate_mutable_block(None, Device.GPU))
        return self._null_block

    @property
    def null_block(self) -> Block | None:
        return self._null_block

    # -- by block id -----------------------------------------------------------------------

    def free(self, block: Block) -> None:
        if type(block) not in _PLAIN_BLOCKS and isinstance(check_block(block), NullBlock):
            return
        block_id = block.block_id
        if block_id is None:
            owner = getattr(block, "_owner", None)
            if owner is not None and any(owner is a for a in self._allocators.values()):
                raise DoubleFreeError("block holds no id (already freed)")
            raise InvalidBlockError("block was never allocated")
        self._allocator_of_id(block_id).free(block)

    def _free_blocks(self, blocks: list[Block]) -> None:
        """``free`` each of ``blocks`` in order (a block table's, null block excluded).

        A block of exactly :class:`PrefixCachingBlock` whose id its owner still holds is
        released directly, as ``free`` would after its checks; any other block goes through
        ``free`` itself (and its typed errors)."""
        owners = self._block_ids_to_allocator
        for block in blocks:
            if type(block) is PrefixCachingBlock:
                block_id = block._block_id
                owner = block._owner
                if (
                    block_id is not None
                    and owners.get(block_id) is owner
                    and type(owner) is PrefixCachingBlockAllocator
                    and owner._refcounter._refcounts[block_id] > 0
                ):
                    owner._release(block_id, block)
                    block._block_id = None
                    owner._block_pool.free_block(block)
                    continue
            self.free(block)

    def _free_table(self, blocks: list[Block]) -> bool:
        """Free a block table's ``blocks`` in order if each is a :class:`PrefixCachingBlock`
        of a bundled prefix-caching device holding its id, no two hold the same id, and the
        table has no null block; else ``False`` and nothing changed (the caller's general
        path names the error). Every check precedes the first release."""
        owners = self._block_ids_to_allocator
        ids: list[BlockId] = []
        for block in blocks:
            if type(block) is not PrefixCachingBlock:
                return False
            block_id = block._block_id
            owner = block._owner
            if (
                block_id is None
                or owners.get(block_id) is not owner
                or type(owner) is not PrefixCachingBlockAllocator
                or not owner._refcounter._refcounts.get(block_id)
            ):
                return False
            ids.append(block_id)
        if len(set(ids)) != len(ids):  # an id held twice: the general path counts handles
            return False
        for block, block_id in zip(blocks, ids, strict=True):
            owner = block._owner  # type: ignore[attr-defined]
            owner._release(block_id, block)
            block._block_id = None  # type: ignore[attr-defined]
            owner._block_pool.free_block(block)
        return True

    def fork(self, last_block: Block) -> list[Block]:
        if isinstance(check_block(last_block, "last_block"), NullBlock):
            raise ForkError("the null block cannot be forked")
        block_id = last_block.block_id
        if block_id is None:
            raise ForkError("cannot fork a freed block")
        return self._allocator_of_id(block_id).fork(last_block)

    def _refcount_of(self, block_id: int) -> int:
        """``get_block_refcount`` without its layers for a plain int id of a bundled
        prefix-caching device; anything else goes through it (and its typed errors)."""
        if block_id.__class__ is int:
            allocator = self._block_ids_to_allocator.get(block_id)
            if type(allocator) is PrefixCachingBlockAllocator:
                return allocator._refcounter._refcounts[block_id]
        return self.get_block_refcount(block_id)

    def get_block_refcount(self, block_id: int) -> int:
        return self._allocator_of_id(block_id).get_block_refcount(block_id)

    def get_block_device(self, block_id: int) -> Device:
        device = self._block_ids_to_device.get(check_block_id(block_id))
        if device is None:
            raise UnknownBlockIdError(f"block id {block_id} belongs to no device")
        return device

    # -- counts and ids --------------------------------------------------------------------

    def get_num_free_blocks(self, device: Device) -> int:
        return self._allocator_for(device).get_num_free_blocks()

    def get_num_total_blocks(self, device: Device) -> int:
        return self._allocator_for(device).get_num_total_blocks()

    def get_physical_block_id(self, device: Device, absolute_id: int) -> int:
        return self._allocator_for(device).get_physical_block_id(absolute_id)

    @property
    def all_block_ids(self) -> frozenset[int]:
        return self._all_block_ids

    def get_num_free_blocks_needed(
        self,
        prev_block: Block | None,
        block_token_ids: Sequence[Sequence[int]],
        device: Device,
        extra_hash: int | None = None,
    ) -> int:
        return self._allocator_for(device).get_num_free_blocks_needed(
            prev_block, block_token_ids, extra_hash
        )

    def get_num_blocks_touched(
        self, blocks: list[Block], device: Device, num_lookahead_slots: int = 0
    ) -> int:
        """The device's estimate for ``blocks``; the null block is never swapped, so it
        is not counted."""
        allocator = self._allocator_for(device)
        return allocator.get_num_blocks_touched(
            self._without_null(checked_blocks(blocks)), num_lookahead_slots
        )

    def get_num_full_blocks_touched(self, blocks: list[Block], device: Device) -> int:
        allocator = self._allocator_for(device)
        return allocator.get_num_full_blocks_touched(self._without_null(checked_blocks(blocks)))

    # -- always the GPU --------------------------------------------------------------------

    def clear_copy_on_writes(self) -> list[tuple[BlockId, BlockId]]:
        gpu = self._gpu_allocator
        if type(gpu) is PrefixCachingBlockAllocator:  # its own method's body (once per step)
            return gpu._cow_tracker.clear_cows()
        return gpu.clear_copy_on_writes()

    def mark_blocks_as_accessed(self, block_ids: list[int], now: float) -> None:
        self._gpu_allocator.mark_blocks_as_accessed(block_ids, now)

    def mark_blocks_as_computed(self, block_ids: list[int]) -> None:
        self._gpu_allocator.mark_blocks_as_computed(block_ids)

    def get_computed_block_ids(
        self,
        prev_computed_block_ids: list[int],
        block_ids: list[int],
        skip_last_block_id: bool = True,
    ) -> list[int]:
        return self._gpu_allocator.get_computed_block_ids(
            prev_computed_block_ids, block_ids, skip_last_block_id
        )

    def get_common_computed_block_ids(self, computed_seq_block_ids: list[list[int]]) -> list[int]:
        return self._gpu_allocator.get_common_computed_block_ids(computed_seq_block_ids)

    # -- prefix cache ----------------------------------------------------------------------

    def get_prefix_cache_hit_rate(self, device: Device) -> float:
        return self._allocator_for(device).get_prefix_cache_hit_rate()

    def reset_prefix_cache(self, device: Device | None = None) -> bool:
        """Reset one device, or (``None``) every device in order CPU, GPU, stopping at
        the first that refuses (upstream's ``and`` chain)."""
        if device is not None:
            return self._allocator_for(device).reset_prefix_cache()
        return all(allocator.reset_prefix_cache() for allocator in self._allocators.values())

    def find_cached_blocks_prefix(
        self, block_hashes: list[int], device: Device = Device.GPU
    ) -> list[int]:
        return self._allocator_for(device).find_cached_blocks_prefix(block_hashes)

    # -- swapping --------------------------------------------------------------------------

    def swap(self, blocks: list[Block], src_device: Device, dst_device: Device) -> dict[int, int]:
        """Move ``blocks`` from ``src_device`` to ``dst_device``; return ``{src: dst}``.

        All or nothing: every block must be held by the source allocator
        (:class:`SwapError` otherwise) and the destination must have exactly as many
        free blocks as the swap-in needs (:class:`NoFreeBlocksError`), both checked
        before anything changes. Handles that share a source id (forks) keep sharing
        one destination id, so each source id maps to exactly one destination id.
        The null block (a sliding-window table's dropped entries, any number of times)
        is skipped: it stays on the GPU and is not in the mapping.
        """
        src = self._allocator_for(src_device)
        dst = self._allocator_for(dst_device)
        if src is dst:
            raise SwapError("source and destination device are the same")
        blocks = self._without_null(checked_blocks(blocks))
        check_no_duplicate_objects(blocks)
        representative: dict[BlockId, Block] = {}
        src_ids: list[BlockId] = []
        for block in blocks:
            block_id = block.block_id
            if (
                isinstance(block, NullBlock)
                or block_id is None
                or self._block_ids_to_allocator.get(block_id) is not src
                or getattr(block, "_owner", None) is not src
                or src.get_block_refcount(block_id) == 0
            ):
                raise SwapError(f"block {block_id} is not held on {src_device}")
            src_ids.append(block_id)
            representative.setdefault(block_id, block)
        firsts = list(representative.values())
        if dst.get_num_free_blocks_needed_for_swap_in(firsts) > dst.get_num_free_blocks():
            raise NoFreeBlocksError()
        src.swap_out(blocks)
        dst.swap_in(firsts)
        mapping: dict[int, int] = {}
        for block, src_id in zip(blocks, src_ids, strict=True):
            first = representative[src_id]
            dst_id = first.block_id
            if dst_id is None:  # pragma: no cover - swap_in always assigns an id
                raise SwapError("swap-in left a block without an id")
            if block is not first:
                _share_block_id(dst, block, dst_id)
            mapping[src_id] = dst_id
        self._swap_mapping.update(mapping)
        return mapping

    def _without_null(self, blocks: list[Block]) -> list[Block]:
        """``blocks`` less every occurrence of this allocator's null block."""
        null_block = self._null_block
        if null_block is None:
            return blocks
        return [block for block in blocks if block is not null_block]

    def get_and_reset_swaps(self) -> list[tuple[int, int]]:
        swaps = list(self._swap_mapping.items())
        self._swap_mapping = {}
        return swaps

    def cow_block_if_not_appendable(self, block: Block) -> BlockId:
        raise NotImplementedError

    def promote_to_immutable_block(self, block: Block) -> BlockId:
        raise NotImplementedError


def _share_block_id(allocator: BlockAllocator, block: Block, block_id: BlockId) -> None:
    if isinstance(allocator, NaiveBlockAllocator | PrefixCachingBlockAllocator):
        allocator._share_block_id(block, block_id)
    else:  # pragma: no cover - only our allocators are swapped between
        raise SwapError("cannot share a destination id on a foreign allocator")
