"""Two broken toy caches, each a one-line patch of :mod:`tests.toy.allocator`'s source (the
patched module is built on first use): what the toy family's machine must catch, and with
which invariant."""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

SOURCE = Path(__file__).with_name("allocator.py")

#: name -> (the text to find, exactly once; the text to put instead; the invariant it breaks)
MUTANTS: dict[str, tuple[str, str, str]] = {
    # free drops every holder of a shared block, not one: the other request's block becomes
    # evictable while it still reads it.
    "free_drops_all_holders": ("        left = self._refs[block] - 1\n",
                               "        left = 0\n", "RC"),
    # eviction forgets to drop the evicted block's key: the stale key names overwritten KV.
    "evict_keeps_key": ("        del self._cached[self._key_of.pop(block)]\n",
                        "        self._key_of.pop(block)\n", "CACHE"),
}


@functools.cache
def module(name: str) -> ModuleType:
    """``tests.toy.allocator`` with mutant ``name``'s patch applied."""
    find, replace, _ = MUTANTS[name]
    source = SOURCE.read_text(encoding="utf-8")
    if source.count(find) != 1:
        raise ValueError(f"mutant {name}: its text occurs {source.count(find)} times")
    qualified = f"tests.toy.mutants.{name}"
    spec = importlib.util.spec_from_loader(qualified, loader=None)
    if spec is None:
        raise ImportError(qualified)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[qualified] = mod
    exec(compile(source.replace(find, replace), f"<{qualified}>", "exec"), mod.__dict__)
    return mod


def _factory(name: str) -> Any:
    def make(num_blocks: int, block_size: int) -> Any:
        return module(name).ToyCache(num_blocks, block_size)

    make.__name__ = name
    return make


free_drops_all_holders = _factory("free_drops_all_holders")
evict_keeps_key = _factory("evict_keeps_key")
