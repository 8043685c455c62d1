"""offload-threshold-retries-overfill-lru (real upstream bug, ACCOUNT): vLLM 0.33.0.

[ACCOUNT] a store that fits (with evictions) is refused at step 2: PrepareStore(req=0, keys=(7, 4, 6, 3))
  expected: 'store [], evict []'
  observed: None
"""
from properties.families.offload.upstream import load_vllm_offload, new_manager
mods = load_vllm_offload(version='0.33.0')
ReqContext = mods.types.ReqContext
def make(num_chunks, **kwargs):
    return new_manager(mods, num_chunks, **kwargs)
mgr = make(1, cache_policy='lru', enable_events=False, store_threshold=3, max_tracker_size=64000)
K = [bytes([i + 1]) * 8 + int(i >= 6).to_bytes(4, 'big') for i in range(8)]
contexts = {}

def ctx(r, positions=True):
    if r not in contexts:
        contexts[r] = c = ReqContext(req_id=f'r{r}')
        for i, key in enumerate(K):
            if positions:
                c.set_offload_key_position(key, 16 * (i + 1))
        mgr.on_new_request(c)
    return contexts[r]

# step 0: PrepareStore(req=0, keys=(7, 4, 6, 3))
out = mgr.prepare_store([K[7], K[4], K[6], K[3]], ctx(0)); print('store', out and ([K.index(k) for k in out.keys_to_store], list(out.store_spec.block_ids), [K.index(k) for k in out.evicted_keys]))
# step 1: PrepareStore(req=0, keys=(7, 4, 6, 3))
out = mgr.prepare_store([K[7], K[4], K[6], K[3]], ctx(0)); print('store', out and ([K.index(k) for k in out.keys_to_store], list(out.store_spec.block_ids), [K.index(k) for k in out.evicted_keys]))
# step 2: PrepareStore(req=0, keys=(7, 4, 6, 3))
out = mgr.prepare_store([K[7], K[4], K[6], K[3]], ctx(0)); print('store', out and ([K.index(k) for k in out.keys_to_store], list(out.store_spec.block_ids), [K.index(k) for k in out.evicted_keys]))

if __name__ == "__main__":
    # Re-run the same program under the judge; raises the violation above.
    from properties.core.replay import check
    check('properties.upstream:vllm_v033_cpu_offload', {'num_chunks': 1, 'store_threshold': 3, 'max_tracker_size': 64000, 'events': False},
          [{'op': 'prepare_store', 'req': 0, 'keys': [7, 4, 6, 3]}, {'op': 'prepare_store', 'req': 0, 'keys': [7, 4, 6, 3]}, {'op': 'prepare_store', 'req': 0, 'keys': [7, 4, 6, 3]}],
          family='properties.families.offload.family:FAMILY', allocator_type='lru')
