"""Bundled reference for vLLM's CPU KV offloading tier (``vllm.v1.kv_offload``, release 0.34.0).

Module, class, method and parameter names mirror upstream's, so an engine switches imports::

    from prefixcache.v1.kv_offload.cpu.manager import CPUOffloadingManager
    from prefixcache.v1.kv_offload.base import OffloadKey, ReqContext, LookupResult

Contract (what the tests in ``tests/offload`` hold it to):

* a key reported ``HIT`` is loadable, and its chunk holds the content stored under it until
  every load of it completes: no chunk is evicted while its write is pending, while loads are
  in flight, nor while its key belongs to the offer being stored;
* chunk accounting is exact: free + write-pending + stored (+ chunks a reset left to in-flight
  transfers, until ``on_reset_flushed``) = ``num_chunks``, across failed stores, request
  finish and reset; a reset serves nothing stored before it;
* ``store_threshold`` admits a key on the offer of its ``store_threshold``-th distinct request;
* LRU evicts the least recently used chunk (recency per request, as 0.34.0 ranks it); ARC keeps
  T1/T2 with ghost lists B1/B2, adapts its T1 target on ghost hits and falls back to the other
  list when the preferred one has no evictable chunk;
* the events, replayed in order, rebuild exactly the set of keys the tier serves;
* misuse raises a typed error (:mod:`prefixcache.v1.kv_offload.errors`) and changes nothing.

The package uses the standard library only.
"""
