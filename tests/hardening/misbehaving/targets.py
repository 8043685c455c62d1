"""Targets that misbehave in exactly one way each: the bundled allocator, except that one call
(from its ``at``-th invocation on) raises, returns a value of the wrong type, hangs, or mutates a
list it was given or returned. ``FAULTS`` lists them; every name is also a module attribute
holding its factory, so ``tests.hardening.misbehaving.targets:<name>`` is a target spec.

Faults fire only on instances bigger than ``load_target``'s 2+2-block probe, so every target
loads and the misbehaviour happens under the runner.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from prefixcache import PREFIXCACHE_CLAIMS
from prefixcache.cpu_gpu_block_allocator import CpuGpuBlockAllocator
from prefixcache.interfaces import Block
from prefixcache.utils import Device

__all__ = ["FAULTS", "Device", "Fault", "MisbehavingAllocator", "prefixcache_claims"]

#: How long a "hanging" call sleeps or spins: far beyond the tests' step timeouts.
HANG_SECONDS = 60.0
#: A "brief" hang: past the tests' step timeouts, short enough to wait out in a worker thread
#: (where the watchdog can only report a blocking sleep once it returns).
BRIEF_SECONDS = 1.0


@dataclass(frozen=True, slots=True)
class Fault:
    """``method`` misbehaves as ``action`` from its ``at``-th call on."""

    method: str
    action: str
    at: int = 1


FAULTS: dict[str, Fault] = {
    # exceptions
    "allocate_raises": Fault("allocate_immutable_block", "raise", 2),
    "allocate_raises_system_exit": Fault("allocate_immutable_block", "system_exit", 2),
    "free_count_raises": Fault("get_num_free_blocks", "raise", 3),
    "drain_raises": Fault("clear_copy_on_writes", "raise", 2),
    "factory_raises": Fault("factory", "raise"),
    # wrong types
    "free_count_str": Fault("get_num_free_blocks", "str"),
    "free_count_none": Fault("get_num_free_blocks", "none"),
    "swap_returns_list": Fault("swap", "list"),
    "block_id_float": Fault("allocate_immutable_block", "float_id"),
    "allocate_returns_none": Fault("allocate_mutable_block", "none"),
    "chain_returns_tuple": Fault("allocate_immutable_blocks", "tuple"),
    "fork_returns_generator": Fault("fork", "generator"),
    "hit_rate_str": Fault("get_prefix_cache_hit_rate", "str"),
    "reset_returns_none": Fault("reset_prefix_cache", "none"),
    "computed_ids_tuple": Fault("get_computed_block_ids", "tuple"),
    "cached_prefix_generator": Fault("find_cached_blocks_prefix", "generator"),
    "touched_float": Fault("get_num_blocks_touched", "float"),
    "cows_dict": Fault("clear_copy_on_writes", "dict"),
    "physical_ids_generator": Fault("physical_block_ids", "generator"),
    "factory_returns_none": Fault("factory", "none"),
    # hangs
    "allocate_sleeps": Fault("allocate_mutable_block", "sleep"),
    "allocate_spins": Fault("allocate_mutable_block", "spin"),
    "allocate_sleeps_briefly": Fault("allocate_mutable_block", "brief"),
    "free_count_sleeps": Fault("get_num_free_blocks", "sleep", 3),
    "factory_sleeps": Fault("factory", "sleep"),
    # mutated arguments
    "allocate_mutates_tokens": Fault("allocate_immutable_block", "mutate_arg"),
    "chain_mutates_chunks": Fault("allocate_immutable_blocks", "mutate_arg"),
    "mark_accessed_clears_ids": Fault("mark_blocks_as_accessed", "mutate_arg"),
    # mutated results
    "fork_mutates_result_later": Fault("fork", "keep"),
    "swap_mutates_result_later": Fault("swap", "keep"),
    "cows_cleared_later": Fault("clear_copy_on_writes", "keep"),
}


class _FloatIdBlock:
    """A block whose ``block_id`` reads as a float; everything else is the real block's."""

    def __init__(self, block: Block) -> None:
        self._block = block

    @property
    def block_id(self) -> float | None:
        bid = self._block.block_id
        return None if bid is None else float(bid)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._block, name)


def _generate(items: list[Any]) -> Iterator[Any]:
    yield from items


def _hang(action: str) -> None:
    if action == "brief":
        time.sleep(BRIEF_SECONDS)
    elif action == "sleep":
        time.sleep(HANG_SECONDS)
    else:  # "spin": a pure-Python busy loop
        deadline = time.monotonic() + HANG_SECONDS
        while time.monotonic() < deadline:
            pass


class MisbehavingAllocator(CpuGpuBlockAllocator):
    """The bundled device-aware allocator with one ``fault``."""

    fault: str = ""
    _spec: Fault | None = None
    _calls: int = 0
    _kept: Any = None  # a returned list or mapping the fault mutates later

    def _trip(self, method: str) -> str:
        """The fault's action if ``method`` misbehaves on this call, else ``""``."""
        spec = self._spec
        if spec is None or spec.method != method:
            return ""
        self._calls += 1
        return spec.action if self._calls >= spec.at else ""

    def _mutate_kept(self) -> None:
        kept, self._kept = self._kept, None
        if isinstance(kept, list) and kept:
            if self.fault == "cows_cleared_later":
                kept.clear()
            else:
                kept.append(kept[0])
        elif isinstance(kept, dict):
            kept[10_000] = 10_001

    # -- allocation ------------------------------------------------------------------------

    def allocate_mutable_block(self, prev_block: Block | None, device: Device,
                               extra_hash: int | None = None) -> Block:
        self._mutate_kept()
        action = self._trip("allocate_mutable_block")
        if action in ("sleep", "spin", "brief"):
            _hang(action)
        if action == "none":
            return None  # type: ignore[return-value]
        return super().allocate_mutable_block(prev_block, device, extra_hash)

    def allocate_immutable_block(self, prev_block: Block | None, token_ids: list[int],
                                 device: Device, extra_hash: int | None = None) -> Block:
        self._mutate_kept()
        action = self._trip("allocate_immutable_block")
        if action == "raise":
            raise RuntimeError("injected failure in allocate_immutable_block")
        if action == "system_exit":
            raise SystemExit(3)
        block = super().allocate_immutable_block(prev_block, token_ids, device, extra_hash)
        if action == "mutate_arg":
            token_ids.append(99)
        if action == "float_id":
            return _FloatIdBlock(block)  # type: ignore[return-value]
        return block

    def allocate_immutable_blocks(self, prev_block: Block | None,
                                  block_token_ids: list[list[int]], device: Device,
                                  extra_hash: int | None = None) -> list[Block]:
        self._mutate_kept()
        action = self._trip("allocate_immutable_blocks")
        blocks = super().allocate_immutable_blocks(prev_block, block_token_ids, device,
                                                   extra_hash)
        if action == "mutate_arg":
            block_token_ids[0][0] = -5
        if action == "tuple":
            return tuple(blocks)  # type: ignore[return-value]
        return blocks

    def fork(self, last_block: Block) -> list[Block]:
        self._mutate_kept()
        action = self._trip("fork")
        blocks = super().fork(last_block)
        if action == "generator":
            return _generate(blocks)  # type: ignore[return-value]
        if action == "keep":
            self._kept = blocks
        return blocks

    def free(self, block: Block) -> None:
        self._mutate_kept()
        super().free(block)

    def swap(self, blocks: list[Block], src_device: Device, dst_device: Device) -> dict[int, int]:
        self._mutate_kept()
        action = self._trip("swap")
        mapping = super().swap(blocks, src_device, dst_device)
        if action == "list":
            return list(mapping.items())  # type: ignore[return-value]
        if action == "keep":
            self._kept = mapping
        return mapping

    # -- queries ---------------------------------------------------------------------------

    def get_num_free_blocks(self, device: Device) -> int:
        action = self._trip("get_num_free_blocks")
        if action == "raise":
            raise RuntimeError("injected failure in get_num_free_blocks")
        if action in ("sleep", "spin"):
            _hang(action)
        free = super().get_num_free_blocks(device)
        if action == "str":
            return str(free)  # type: ignore[return-value]
        if action == "none":
            return None  # type: ignore[return-value]
        return free

    def get_num_blocks_touched(self, blocks: list[Block], device: Device,
                               num_lookahead_slots: int = 0) -> int:
        count = super().get_num_blocks_touched(blocks, device, num_lookahead_slots)
        if self._trip("get_num_blocks_touched") == "float":
            return float(count)  # type: ignore[return-value]
        return count

    def clear_copy_on_writes(self) -> list[tuple[int, int]]:
        action = self._trip("clear_copy_on_writes")
        if action == "raise":
            raise RuntimeError("injected failure in clear_copy_on_writes")
        cows = super().clear_copy_on_writes()
        if action == "dict":
            return dict(cows)  # type: ignore[return-value]
        if action == "keep":
            self._kept = cows
        return cows

    def mark_blocks_as_accessed(self, block_ids: list[int], now: float) -> None:
        super().mark_blocks_as_accessed(block_ids, now)
        if self._trip("mark_blocks_as_accessed") == "mutate_arg":
            block_ids.clear()

    def get_computed_block_ids(self, prev_computed_block_ids: list[int], block_ids: list[int],
                               skip_last_block_id: bool = True) -> list[int]:
        ids = super().get_computed_block_ids(prev_computed_block_ids, block_ids,
                                             skip_last_block_id)
        if self._trip("get_computed_block_ids") == "tuple":
            return tuple(ids)  # type: ignore[return-value]
        return ids

    def find_cached_blocks_prefix(self, block_hashes: list[int],
                                  device: Device = Device.GPU) -> list[int]:
        found = super().find_cached_blocks_prefix(block_hashes, device)
        if self._trip("find_cached_blocks_prefix") == "generator":
            return _generate(found)  # type: ignore[return-value]
        return found

    def get_prefix_cache_hit_rate(self, device: Device) -> float:
        rate = super().get_prefix_cache_hit_rate(device)
        if self._trip("get_prefix_cache_hit_rate") == "str":
            return f"{rate:.2f}"  # type: ignore[return-value]
        return rate

    def reset_prefix_cache(self, device: Device | None = None) -> bool:
        done = super().reset_prefix_cache(device)
        if self._trip("reset_prefix_cache") == "none":
            return None  # type: ignore[return-value]
        return done


def _factory(name: str) -> Callable[..., Any]:
    fault = FAULTS[name]

    def factory(allocator_type: str, num_gpu_blocks: int, num_cpu_blocks: int,
                block_size: int) -> Any:
        probe = num_gpu_blocks <= 2 and num_cpu_blocks <= 2
        if fault.method == "factory" and not probe:
            if fault.action == "raise":
                raise RuntimeError(f"injected failure creating {num_gpu_blocks} blocks")
            if fault.action == "none":
                return None
            _hang(fault.action)
        base = CpuGpuBlockAllocator.create(allocator_type, num_gpu_blocks, num_cpu_blocks,
                                           block_size)
        alloc = MisbehavingAllocator(cpu_block_allocator=base._allocators[Device.CPU],
                                     gpu_block_allocator=base._allocators[Device.GPU])
        if not probe:
            alloc.fault = name
            alloc._spec = fault
        return alloc

    factory.__name__ = factory.__qualname__ = name
    return factory


def prefixcache_claims(factory: Any) -> dict[str, Any]:
    """Claims of a misbehaving target (read by ``properties.core.targets.load_target``)."""
    return {**PREFIXCACHE_CLAIMS, "name": f"misbehaving/{getattr(factory, '__name__', '?')}",
            "version": "fault"}


globals().update({name: _factory(name) for name in FAULTS})
