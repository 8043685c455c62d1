"""mm-key-without-offset (real upstream bug, HASH): vLLM 0.11.0."""

from properties.families.v1.stand_ins import MMFeature, MMPosition, StandInRequest
from properties.families.v1.upstream import hash_function, load_vllm_v1

m = load_vllm_v1(version='0.11.0')
pool = m.block_pool.BlockPool(8, True, enable_kv_cache_events=True)
hasher = m.kv_cache_utils.get_request_block_hasher(2, hash_function(m))
B = pool.blocks

r0 = StandInRequest(
    'r0', [0, 1, 0, 0], lora_request=None,
    cache_salt=None, mm_features=[MMFeature('img-b', MMPosition(0, 1))], prompt_embeds=None)
r0.block_hashes.extend(hasher(r0))
print('r0 block_hashes', [bytes(h).hex()[:12] for h in r0.block_hashes])
r1 = StandInRequest(
    'r1', [0, 1, 0, 0], lora_request=None,
    cache_salt=None, mm_features=[MMFeature('img-b', MMPosition(1, 1))], prompt_embeds=None)
r1.block_hashes.extend(hasher(r1))
print('r1 block_hashes', [bytes(h).hex()[:12] for h in r1.block_hashes])

print('free queue', [b.block_id for b in pool.free_block_queue.get_all_free_blocks()])
print('ref_cnt', [b.ref_cnt for b in B])
