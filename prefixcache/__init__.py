"""prefixcache: a reference prefix-caching KV-cache block allocator.

API-compatible with the vLLM-v0 / Aphrodite block allocators (module names mirror
upstream), with collision-resistant hashing, typed errors, failure atomicity,
no recursion and O(1)/O(log n) operations.
"""

from prefixcache.block_table import BlockTable
from prefixcache.common import (
    BlockList,
    BlockPool,
    CacheMetricData,
    CopyOnWriteTracker,
    ReadOnlyRefCounter,
    RefCounter,
    get_all_blocks_recursively,
)
from prefixcache.cpu_gpu_block_allocator import CpuGpuBlockAllocator, NullBlock
from prefixcache.errors import (
    BlockFullError,
    DoubleFreeError,
    ForkError,
    ImmutableBlockError,
    InvalidArgumentError,
    InvalidBlockError,
    NoFreeBlocksError,
    PrefixCacheError,
    SwapError,
    UnknownBlockIdError,
    UnknownDeviceError,
)
from prefixcache.evictor import BlockMetaData, EvictionPolicy, Evictor, LRUEvictor, make_evictor
from prefixcache.hashing import (
    HashFunction,
    default_hash_function,
    hash_block_tokens,
    make_extra_hash,
)
from prefixcache.interfaces import Block, BlockAllocator, BlockId, DeviceAwareBlockAllocator
from prefixcache.naive_block import NaiveBlock, NaiveBlockAllocator
from prefixcache.prefix_caching_block import (
    BlockTracker,
    ComputedBlocksTracker,
    LastAccessBlocksTracker,
    PrefixCachingBlock,
    PrefixCachingBlockAllocator,
)
from prefixcache.utils import Device, cdiv, chunk_list

__version__ = "0.1.0"

#: What this allocator claims to a conformance suite: failed operations change nothing,
#: misuse raises these typed errors, and eviction is exact LRU.
PREFIXCACHE_CLAIMS: dict[str, object] = {
    "name": "prefixcache",
    "atomic": True,
    "typed_errors": True,
    "lru": True,
    "misuse_errors": (PrefixCacheError,),
}

__all__ = [
    "PREFIXCACHE_CLAIMS",
    "Block",
    "BlockAllocator",
    "BlockFullError",
    "BlockId",
    "BlockList",
    "BlockMetaData",
    "BlockPool",
    "BlockTable",
    "BlockTracker",
    "CacheMetricData",
    "ComputedBlocksTracker",
    "CopyOnWriteTracker",
    "CpuGpuBlockAllocator",
    "Device",
    "DeviceAwareBlockAllocator",
    "DoubleFreeError",
    "EvictionPolicy",
    "Evictor",
    "ForkError",
    "HashFunction",
    "ImmutableBlockError",
    "InvalidArgumentError",
    "InvalidBlockError",
    "LRUEvictor",
    "LastAccessBlocksTracker",
    "NaiveBlock",
    "NaiveBlockAllocator",
    "NoFreeBlocksError",
    "NullBlock",
    "PrefixCacheError",
    "PrefixCachingBlock",
    "PrefixCachingBlockAllocator",
    "ReadOnlyRefCounter",
    "RefCounter",
    "SwapError",
    "UnknownBlockIdError",
    "UnknownDeviceError",
    "__version__",
    "cdiv",
    "chunk_list",
    "default_hash_function",
    "get_all_blocks_recursively",
    "hash_block_tokens",
    "make_evictor",
    "make_extra_hash",
]
