"""offload-refused-load-pins-keys-lru (real upstream bug, ATOMIC): vLLM 0.33.0.

[ATOMIC] a refused prepare_load changed the tier (loading keys [0], which are not HIT) at step 2: PrepareLoad(req=1, keys=(2, 0))
  expected: (('MISS', 'MISS', 'HIT', 'MISS', 'MISS', 'MISS', 'MISS', 'MISS'), None, (None, None, 0, None, None, None, None, None))
  observed: (('MISS', 'MISS', 'HIT', 'MISS', 'MISS', 'MISS', 'MISS', 'MISS'), None, (None, None, 1, None, None, None, None, None))
"""
from properties.families.offload.upstream import load_vllm_offload, new_manager
mods = load_vllm_offload(version='0.33.0')
ReqContext = mods.types.ReqContext
def make(num_chunks, **kwargs):
    return new_manager(mods, num_chunks, **kwargs)
mgr = make(1, cache_policy='lru', enable_events=True, store_threshold=1, max_tracker_size=64000)
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

# step 0: PrepareStore(req=0, keys=(2,))
out = mgr.prepare_store([K[2]], ctx(0)); print('store', out and ([K.index(k) for k in out.keys_to_store], list(out.store_spec.block_ids), [K.index(k) for k in out.evicted_keys]))
# step 1: CompleteStore(req=0, keys=(2,), success=True)
mgr.complete_store([K[2]], ctx(0), success=True)
# step 2: PrepareLoad(req=1, keys=(2, 0))
try:
    print('load', list(mgr.prepare_load([K[2], K[0]], ctx(1)).block_ids))
except Exception as exc:
    print('step 2 raised', repr(exc))

if __name__ == "__main__":
    # Re-run the same program under the judge; raises the violation above.
    from properties.core.replay import check
    check('properties.upstream:vllm_v033_cpu_offload', {'num_chunks': 1, 'store_threshold': 1, 'max_tracker_size': 64000, 'events': True},
          [{'op': 'prepare_store', 'req': 0, 'keys': [2]}, {'op': 'complete_store', 'req': 0, 'keys': [2], 'success': True}, {'op': 'prepare_load', 'req': 1, 'keys': [2, 0]}],
          family='properties.families.offload.family:FAMILY', allocator_type='lru')
