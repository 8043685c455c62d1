"""manager-removed-per-copy
(design deviation, CACHE): vLLM 0.33.0 KVCacheManager.

The suite reports:
[CACHE] event replay disagrees with the cache map (keys it can serve) at step 7: TakeEvents()
"""

from properties.families.v1.request.stand_ins import ManagerRequest, RequestStatus
from properties.families.v1.request.target import ManagerConfig, vllm_v033_manager
from properties.families.v1.stand_ins import LoraRef  # noqa: F401  (requests with an adapter)

target = vllm_v033_manager()  # vLLM 0.33.0
config = ManagerConfig(
    num_blocks=10, groups=(('full', 4),), hash_block_size=4,
    max_model_len=64, events=True, log_stats=True)
mgr = target.create(config)
hasher = target.hasher(4)

r0 = ManagerRequest('r0', [0, 0, 0, 0, 0, 0, 0, 0, 0, 0], lora_request=None, cache_salt=None,
    num_prompt_tokens=10, hasher=hasher)
r0.rehash()
r1 = ManagerRequest('r1', [0, 0, 0, 0], lora_request=None, cache_salt=None,
    num_prompt_tokens=4, hasher=hasher)
r1.rehash()

# a step opens
mgr.new_step_starts()
hit_blocks, hit, _ = mgr.get_computed_blocks(r0)
print('r0 hit', hit, hit_blocks.get_block_ids())  # 0, [[]]
out = mgr.allocate_slots(r0, 4, hit, hit_blocks, num_lookahead_tokens=0)
print('r0 allocate_slots', out and out.get_block_ids())
mgr.record_prefix_cache_stats(r0, 0)  # admitted
# tokens [0, 4) of r0 are computed when the step ends
r0.status, r0.num_computed_tokens = RequestStatus.RUNNING, 4
hit_blocks, hit, _ = mgr.get_computed_blocks(r1)
print('r1 hit', hit, hit_blocks.get_block_ids())  # 0, [[]]
out = mgr.allocate_slots(r1, 4, hit, hit_blocks, num_lookahead_tokens=0)
print('r1 allocate_slots', out and out.get_block_ids())
mgr.record_prefix_cache_stats(r1, 0)  # admitted
# tokens [0, 4) of r1 are computed when the step ends
r1.status, r1.num_computed_tokens = RequestStatus.RUNNING, 4
# the step ends: its scheduled tokens' KV is computed
print('r1 estimate_cached_tokens', mgr.estimate_cached_tokens(r1))  # 4
mgr.free(r1)  # finished
print('usage', mgr.usage)  # 0.1111
print('stats', mgr.make_prefix_cache_stats())
for e in mgr.take_events():
    print(e)
mgr.evict_blocks({1})  # r0's load failed from block 0 on
for e in mgr.take_events():
    print(e)

print('ref_cnt', [b.ref_cnt for b in mgr.block_pool.blocks])
print('hashed', [b.block_id for b in mgr.block_pool.blocks if b.block_hash is not None])
