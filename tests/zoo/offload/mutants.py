"""Broken bundled offload managers: each a small textual patch of
``prefixcache/v1/kv_offload/cpu/`` (the manager, the policy factory, the LRU and ARC policies),
applied to a copy of the source with :func:`tests.zoo.patching.apply` (a stale patch fails
loudly), and the invariant the offload machine must catch it with, under its policy.

A copy of mutant ``name`` is the package ``prefixcache_zoo_offload.<name>``: ``lru.py``,
``arc.py``, ``factory.py`` and ``manager.py`` are re-executed from the (patched) source with
their imports of each other redirected into the copy; ``base.py``, ``common.py`` and the errors
stay the bundled modules. ``tests.zoo.offload.mutants:<name>`` is each mutant's target spec.
"""

from __future__ import annotations

import ast
import linecache
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import prefixcache.v1.kv_offload
from models.core.invariants import Invariant
from models.families.offload.invariants import OffloadInvariants as F
from properties.families.offload.targets import OffloadTarget, class_target
from tests.zoo.patching import Patch, PatchError, apply

ROOT = "prefixcache_zoo_offload"
_PACKAGE = "prefixcache.v1.kv_offload.cpu"
_SOURCE = Path(prefixcache.v1.kv_offload.__file__).resolve().parent / "cpu"
#: Re-executed in this order (the manager imports the factory, the factory the policies).
MODULES = ("policies.lru", "policies.arc", "policies.factory", "manager")
M, LRU, ARC = "v1.kv_offload.cpu.manager", "v1.kv_offload.cpu.policies.lru", \
    "v1.kv_offload.cpu.policies.arc"


@dataclass(frozen=True)
class Mutant:
    """One broken manager: its bug, the invariant it breaks, the policy it is judged under
    (the allocator type), and other invariants a differently shaped program may meet first."""

    name: str
    family: Invariant
    policy: str
    bug: str
    patch: Patch
    also: tuple[Invariant, ...] = ()

    @property
    def families(self) -> tuple[Invariant, ...]:
        return (self.family, *self.also)


def _m(name: str, family: Invariant, policy: str, bug: str, module: str, scope: str,
       find: str, replace: str, also: tuple[Invariant, ...] = ()) -> Mutant:
    return Mutant(name, family, policy, bug, Patch(module, scope, find, replace), also)


MUTANTS: tuple[Mutant, ...] = (
    # --- chunks a transfer still uses
    _m("offer_not_protected", F.PINNED, "lru", "keys of the offer are evictable by its store",
       M, "CPUOffloadingManager.prepare_store", "evicted = self._policy.evict(shortfall, offer)",
       "evicted = self._policy.evict(shortfall, set())  # BUG"),
    _m("load_released_at_once", F.PINNED, "lru",
       "complete_load of a key loaded twice releases both loads",
       M, "CPUOffloadingManager.complete_load", "chunk.ref_cnt -= 1",
       "chunk.ref_cnt = 0  # BUG: every load released", also=(F.CRASH, F.ACCOUNT)),
    _m("reset_reuses_inflight_chunks", F.PINNED, "lru",
       "a reset hands chunks of transfers in flight to new stores at once",
       M, "CPUOffloadingManager.reset_cache",
       "self._quarantined.update(chunk.chunk_id for _, chunk in resident if chunk.ref_cnt != 0)",
       "pass  # BUG: nothing quarantined", also=(F.ACCOUNT,)),
    _m("arc_evicts_pending", F.PINNED, "arc", "ARC evicts a chunk whose write is pending",
       ARC, "_take", "if chunk.ref_cnt == 0 and key not in protected:",
       "if chunk.ref_cnt <= 0 and key not in protected:  # BUG", also=(F.ACCOUNT,)),
    # --- what lookup answers
    _m("pending_reads_as_hit", F.HIT, "lru", "a key being written is reported HIT",
       M, "CPUOffloadingManager.lookup",
       "return LookupResult.HIT if chunk.ref_cnt >= 0 else LookupResult.HIT_PENDING",
       "return LookupResult.HIT  # BUG"),
    _m("failed_store_served", F.HIT, "lru", "a failed write is served as stored",
       M, "CPUOffloadingManager.complete_store", "if success:\n    for chunk in chunks:",
       "if True:  # BUG\n    for chunk in chunks:",
       also=(F.EVENTS,)),
    _m("reused_chunk_reads_ready", F.HIT, "lru",
       "a freed chunk handed to a new store keeps its ready state",
       M, "CPUOffloadingManager._allocate", "chunk.ref_cnt = -1", "pass  # BUG",
       also=(F.PINNED, F.ACCOUNT, F.CRASH)),
    # --- chunk accounting
    _m("failed_store_leaks_chunk", F.ACCOUNT, "lru", "a failed write never frees its chunk",
       M, "CPUOffloadingManager.complete_store", "self._free_list.append(chunk)",
       "pass  # BUG: chunk leaked"),
    _m("refuses_exact_fit", F.ACCOUNT, "lru",
       "a store needing every evictable chunk is refused",
       M, "CPUOffloadingManager.prepare_store",
       "if shortfall > self._num_evictable_cache_chunks:",
       "if shortfall >= self._num_evictable_cache_chunks:  # BUG"),
    _m("pending_stored_again", F.ACCOUNT, "lru",
       "a key whose write is pending gets a second chunk when offered again",
       M, "CPUOffloadingManager.prepare_store", "elif chunk.ref_cnt >= 0:",
       "elif chunk.ref_cnt >= 0 or True:  # BUG\n    keys_to_store.append(key)",
       also=(F.CRASH,)),
    _m("free_count_ignores_quarantine", F.ACCOUNT, "lru",
       "get_num_free_chunks counts chunks a reset left to transfers in flight",
       M, "CPUOffloadingManager.get_num_free_chunks", "- self._quarantined_ahead)",
       ")  # BUG", also=(F.PINNED, F.CRASH)),
    # --- misuse
    _m("duplicate_offer_accepted", F.ATOMIC, "lru",
       "an offer naming a key twice is accepted (upstream's behaviour: a chunk leaks)",
       M, "CPUOffloadingManager.prepare_store", "if len(offer) != len(keys):",
       "if False:  # BUG: duplicates accepted"),
    _m("stale_completion_accepted", F.ATOMIC, "lru",
       "a store completed again (a worker reporting twice) releases or re-counts its chunk",
       M, "CPUOffloadingManager.complete_store", "if chunk is None or chunk.ref_cnt >= 0:",
       "if chunk is None:  # BUG: a written chunk is completed again",
       also=(F.ACCOUNT, F.HIT, F.EVENTS, F.PINNED, F.CRASH)),
    # --- reset
    _m("reset_keeps_keys", F.RESET, "lru", "a reset leaves the policy's keys resident",
       M, "CPUOffloadingManager.reset_cache", "self._policy.clear()", "pass  # BUG",
       also=(F.ACCOUNT, F.HIT)),
    # --- admission
    _m("threshold_off_by_one", F.ADMIT, "lru", "store_threshold admits one request late",
       M, "CPUOffloadingManager.prepare_store",
       "if counts is not None and counts.get(key, 0) < threshold:",
       "if counts is not None and counts.get(key, 0) <= threshold:  # BUG"),
    _m("threshold_counts_retries", F.ADMIT, "lru",
       "store_threshold counts a request's every offer of a key (0.33.0's defect)",
       M, "CPUOffloadingManager._count_offer", "if key not in counted:", "if True:  # BUG"),
    # --- events
    _m("stored_event_missing", F.EVENTS, "lru", "a completed store is not announced",
       M, "CPUOffloadingManager.complete_store", "if keys and self.events is not None:",
       "if keys and self.events is not None and not success:  # BUG"),
    _m("eviction_event_missing", F.EVENTS, "lru", "evictions are not announced",
       M, "CPUOffloadingManager.prepare_store",
       "self.events.append(OffloadingEvent(evicted_keys, self.medium, removed=True))",
       "pass  # BUG"),
    _m("reset_announces_nothing", F.EVENTS, "lru",
       "a reset does not announce the removal of what it served (upstream's behaviour)",
       M, "CPUOffloadingManager.reset_cache", "if stored and self.events is not None:",
       "if False:  # BUG"),
    # --- eviction order
    _m("lru_commits_tail_last", F.ORDER, "lru",
       "LRU commits a finished request head first, so its tail ends most recent",
       LRU, "LRUCachePolicy.on_request_finished", "for key in reversed(keys):",
       "for key in keys:  # BUG"),
    _m("lru_access_ignored", F.ORDER, "lru", "a load does not refresh its keys' recency",
       LRU, "LRUCachePolicy.on_request_access",
       "bucket = self._request_bucket(req_context)",
       "return  # BUG\nbucket = self._request_bucket(req_context)"),
    # ARC's adaptive target and promotions, and the commit of a finished request's recency
    _m("finish_commits_nothing", F.ORDER, "lru", "finishing a request commits no recency",
       M, "CPUOffloadingManager.on_request_finished", "in_order = state.keys_in_order",
       "in_order: list[OffloadKey] = []  # BUG"),
    _m("arc_t1_target_ignored", F.ORDER, "arc",
       "ARC prefers T2 one pick early (its T1 target is off by one)",
       ARC, "ARCCachePolicy.evict",
       "prefer_t1 = max(0, min(n, len(self.t1) - int(self.target_t1_size) + 1))",
       "prefer_t1 = max(0, min(n, len(self.t1) - int(self.target_t1_size)))  # BUG"),
    _m("arc_b2_hit_grows_t1", F.ORDER, "arc", "a B2 ghost hit grows T1's target",
       ARC, "ARCCachePolicy._ghost_hit",
       "self.target_t1_size = max(self.target_t1_size - delta, 0)",
       "self.target_t1_size = min(self.target_t1_size + delta, self.cache_capacity)  # BUG"),
    _m("arc_never_promotes", F.ORDER, "arc", "a reused key stays in T1",
       ARC, "ARCCachePolicy.on_request_finished", "t2[key] = t1.pop(key)",
       "t1.move_to_end(key)  # BUG"),
    _m("arc_reuse_not_recorded", F.ORDER, "arc",
       "a request's loads are not recorded as reuses (nothing reaches T2)",
       M, "CPUOffloadingManager._record_state", "if reused_keys:", "if False:  # BUG"),
)
BY_NAME = {m.name: m for m in MUTANTS}


class _Redirect(ast.NodeTransformer):
    """Imports of the re-executed modules point into the copy."""

    def __init__(self, copy: str) -> None:
        self.copy = copy

    def visit_ImportFrom(self, node: ast.ImportFrom) -> ast.ImportFrom:
        module = node.module or ""
        rel = module[len(_PACKAGE) + 1:] if module.startswith(_PACKAGE + ".") else ""
        if node.level == 0 and rel in MODULES:
            node.module = f"{self.copy}.{rel}"
        return node


@cache
def package(name: str) -> ModuleType:
    """Mutant ``name``'s copy (built once)."""
    mutant = BY_NAME[name]
    wanted = {f"v1.kv_offload.cpu.{m}" for m in MODULES}
    if mutant.patch.module not in wanted:
        raise PatchError(f"zoo mutant {name!r}: a patch must name one of {sorted(wanted)}")
    copy = f"{ROOT}.{name}"
    sys.modules.setdefault(ROOT, ModuleType(ROOT))
    for pkg in (copy, f"{copy}.policies"):
        module = ModuleType(pkg)
        module.__path__ = []
        sys.modules[pkg] = module
    for rel in MODULES:
        source = (_SOURCE / f"{rel.replace('.', '/')}.py").read_text(encoding="utf-8")
        if mutant.patch.module == f"v1.kv_offload.cpu.{rel}":
            source = apply(source, mutant.patch, name)
        filename = f"<{copy}>/prefixcache/v1/kv_offload/cpu/{rel.replace('.', '/')}.py"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        tree = _Redirect(copy).visit(ast.parse(source, filename))
        module = ModuleType(f"{copy}.{rel}")
        module.__file__ = filename
        sys.modules[module.__name__] = module
        exec(compile(tree, filename, "exec"), module.__dict__)
    return sys.modules[copy]


def manager_class(name: str) -> Any:
    """Mutant ``name``'s ``CPUOffloadingManager``."""
    package(name)
    return sys.modules[f"{ROOT}.{name}.manager"].CPUOffloadingManager


def _target(name: str) -> Callable[[], OffloadTarget]:
    def target() -> OffloadTarget:
        setup = ("from tests.zoo.offload.mutants import manager_class",
                 f"Manager = manager_class({name!r})")
        return class_target(manager_class(name), f"{__name__}:{name}", setup,
                            name=f"zoo/{name}", version="mutant")

    target.__name__ = target.__qualname__ = name
    target.__module__ = __name__
    return target


for _mutant in MUTANTS:
    globals()[_mutant.name] = _target(_mutant.name)
