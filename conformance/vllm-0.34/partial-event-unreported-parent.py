"""partial-event-unreported-parent (real upstream bug, CACHE): vLLM 0.34.0."""

from properties.families.v1.stand_ins import StandInRequest
from properties.families.v1.upstream import hash_function, load_vllm_v1

m = load_vllm_v1(version='0.34.0')
pool = m.block_pool.BlockPool(8, True, 2, enable_kv_cache_events=True)
hasher = m.kv_cache_utils.get_request_block_hasher(2, hash_function(m))
B = pool.blocks

r0 = StandInRequest(
    'r0', [1, 2, 3, 4, 5, 6, 7, 8], lora_request=None,
    cache_salt=None, mm_features=[], prompt_embeds=None)
r0.block_hashes.extend(hasher(r0))
print('r0 block_hashes', [bytes(h).hex()[:12] for h in r0.block_hashes])
print('get_new_blocks', [b.block_id for b in pool.get_new_blocks(1)])
pool.cache_partial_block(r0, B[1], 4, 1, 6)
for e in pool.take_events():
    print(e)

print('free queue', [b.block_id for b in pool.free_block_queue.get_all_free_blocks()])
print('ref_cnt', [b.ref_cnt for b in B])
