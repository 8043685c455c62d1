"""manager-preempted-in-step-uncomputed-hit
(real upstream bug, COMPUTED): vLLM 0.33.0 KVCacheManager.

The suite reports:
[COMPUTED] hit of 4 tokens: group 0 position 0 (block 1 slot 0) does not hold this request's
computed KV at step 2: Preempt(req=0)
"""

from properties.families.v1.request.stand_ins import ManagerRequest, RequestStatus
from properties.families.v1.request.target import ManagerConfig, vllm_v033_manager
from properties.families.v1.stand_ins import LoraRef  # noqa: F401  (requests with an adapter)

target = vllm_v033_manager()  # vLLM 0.33.0
config = ManagerConfig(
    num_blocks=10, groups=(('full', 4),), hash_block_size=4,
    max_model_len=64, events=False)
mgr = target.create(config)
hasher = target.hasher(4)

r0 = ManagerRequest('r0', [0, 0, 0, 0, 0], lora_request=None, cache_salt=None,
    num_prompt_tokens=5, hasher=hasher)
r0.rehash()

# a step opens
mgr.new_step_starts()
hit_blocks, hit, _ = mgr.get_computed_blocks(r0)
print('r0 hit', hit, hit_blocks.get_block_ids())  # 0, [[]]
out = mgr.allocate_slots(r0, 4, hit, hit_blocks, num_lookahead_tokens=0)
print('r0 allocate_slots', out and out.get_block_ids())
# tokens [0, 4) of r0 are computed when the step ends
r0.status, r0.num_computed_tokens = RequestStatus.RUNNING, 4
mgr.free(r0)  # preempted inside the step
r0.num_computed_tokens, r0.status = 0, RequestStatus.PREEMPTED
r0.num_preemptions += 1
hit_blocks, hit, _ = mgr.get_computed_blocks(r0)
print('r0 hit', hit, hit_blocks.get_block_ids())  # 4, [[1]]

print('ref_cnt', [b.ref_cnt for b in mgr.block_pool.blocks])
print('hashed', [b.block_id for b in mgr.block_pool.blocks if b.block_hash is not None])
