"""offload-reset-announces-no-removal-lru (design deviation, EVENTS): vLLM 0.33.0.

[EVENTS] the events replayed rebuild other keys than those served at step 5: TakeEvents()
  expected: []
  observed: [0, 2, 7]
"""
from properties.families.offload.upstream import load_vllm_offload, new_manager
mods = load_vllm_offload(version='0.33.0')
ReqContext = mods.types.ReqContext
def make(num_chunks, **kwargs):
    return new_manager(mods, num_chunks, **kwargs)
mgr = make(3, cache_policy='lru', enable_events=True, store_threshold=1, max_tracker_size=2)
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

# step 0: PrepareStore(req=0, keys=(4,))
out = mgr.prepare_store([K[4]], ctx(0)); print('store', out and ([K.index(k) for k in out.keys_to_store], list(out.store_spec.block_ids), [K.index(k) for k in out.evicted_keys]))
# step 1: CompleteStore(req=0, keys=(4,), success=True)
mgr.complete_store([K[4]], ctx(0), success=True)
# step 2: PrepareStore(req=1, keys=(0, 7, 2))
out = mgr.prepare_store([K[0], K[7], K[2]], ctx(1)); print('store', out and ([K.index(k) for k in out.keys_to_store], list(out.store_spec.block_ids), [K.index(k) for k in out.evicted_keys]))
# step 3: CompleteStore(req=1, keys=(0, 7, 2), success=True)
mgr.complete_store([K[0], K[7], K[2]], ctx(1), success=True)
# step 4: Reset()
mgr.reset_cache()
# step 5: TakeEvents()
print('events', [(e.removed, [K.index(k) for k in e.keys]) for e in mgr.take_events()])

if __name__ == "__main__":
    # Re-run the same program under the judge; raises the violation above.
    from properties.core.replay import check
    check('properties.upstream:vllm_v033_cpu_offload', {'num_chunks': 3, 'store_threshold': 1, 'max_tracker_size': 2, 'events': True},
          [{'op': 'prepare_store', 'req': 0, 'keys': [4]}, {'op': 'complete_store', 'req': 0, 'keys': [4], 'success': True}, {'op': 'prepare_store', 'req': 1, 'keys': [0, 7, 2]}, {'op': 'complete_store', 'req': 1, 'keys': [0, 7, 2], 'success': True}, {'op': 'reset'}, {'op': 'take_events'}],
          family='properties.families.offload.family:FAMILY', allocator_type='lru')
