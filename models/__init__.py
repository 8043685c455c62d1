"""The executable abstract model of a prefix-caching block allocator, and the shadow KV memory.

Shares no code with any allocator it judges (standard library only). Reading order:
``operations``, ``families``, ``capabilities`` (the shared vocabulary); ``content`` (exact
content identities), ``lru`` (the eviction rank), ``pool`` (one device's id states),
``blocks`` (block and table records); ``choice``, ``context``, ``fresh_ids`` (refinement of the
target's choices); ``allocator_model`` (the primitive steps); ``ops/`` (one class per
operation: its contract, cost and step); ``contract`` (what a program may ask); ``checks``
(judging a snapshot); ``shadow_memory`` (the data plane); ``queries`` and ``oracle`` (the
composition).
"""
