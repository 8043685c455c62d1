"""events-without-extra-keys (design deviation, CACHE): vLLM 0.11.0."""

from properties.families.v1.stand_ins import StandInRequest
from properties.families.v1.upstream import hash_function, load_vllm_v1

m = load_vllm_v1(version='0.11.0')
pool = m.block_pool.BlockPool(4, True, enable_kv_cache_events=True)
hasher = m.kv_cache_utils.get_request_block_hasher(2, hash_function(m))
B = pool.blocks

r0 = StandInRequest(
    'r0', [0, 0], lora_request=None,
    cache_salt=None, mm_features=[], prompt_embeds=None)
r0.block_hashes.extend(hasher(r0))
print('r0 block_hashes', [bytes(h).hex()[:12] for h in r0.block_hashes])
r1 = StandInRequest(
    'r1', [0, 0], lora_request=None,
    cache_salt='s1', mm_features=[], prompt_embeds=None)
r1.block_hashes.extend(hasher(r1))
print('r1 block_hashes', [bytes(h).hex()[:12] for h in r1.block_hashes])
try:
    print('get_new_blocks', [b.block_id for b in pool.get_new_blocks(1)])
except ValueError as exc:
    print('get_new_blocks refused:', exc)
pool.cache_full_blocks(r0, [B[i] for i in [1]], 0, 1, 2, 0)
pool.free_blocks([B[i] for i in [1]])
for e in pool.take_events():
    print(e)
try:
    print('get_new_blocks', [b.block_id for b in pool.get_new_blocks(3)])
except ValueError as exc:
    print('get_new_blocks refused:', exc)
pool.cache_full_blocks(r1, [B[i] for i in [1]], 0, 1, 2, 0)
for e in pool.take_events():
    print(e)

print('free queue', [b.block_id for b in pool.free_block_queue.get_all_free_blocks()])
print('ref_cnt', [b.ref_cnt for b in B])
