"""offload-duplicate-offer-accepted-arc (real upstream bug, ATOMIC): vLLM 0.33.0.

[ATOMIC] prepare_store must be refused, changing nothing; it went through (an offer names a key twice: [2, 3, 6, 2]) at step 0: PrepareStore(req=0, keys=(2, 3, 6, 2))
  expected: None
  observed: StoreOut(to_store=(), chunks=(), evicted=())
"""
from properties.families.offload.upstream import load_vllm_offload, new_manager
mods = load_vllm_offload(version='0.33.0')
ReqContext = mods.types.ReqContext
def make(num_chunks, **kwargs):
    return new_manager(mods, num_chunks, **kwargs)
mgr = make(1, cache_policy='arc', enable_events=False, store_threshold=3, max_tracker_size=2)
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

# step 0: PrepareStore(req=0, keys=(2, 3, 6, 2))
out = mgr.prepare_store([K[2], K[3], K[6], K[2]], ctx(0)); print('store', out and ([K.index(k) for k in out.keys_to_store], list(out.store_spec.block_ids), [K.index(k) for k in out.evicted_keys]))

if __name__ == "__main__":
    # Re-run the same program under the judge; raises the violation above.
    from properties.core.replay import check
    check('properties.upstream:vllm_v033_cpu_offload', {'num_chunks': 1, 'store_threshold': 3, 'max_tracker_size': 2, 'events': False},
          [{'op': 'prepare_store', 'req': 0, 'keys': [2, 3, 6, 2]}],
          family='properties.families.offload.family:FAMILY', allocator_type='arc')
