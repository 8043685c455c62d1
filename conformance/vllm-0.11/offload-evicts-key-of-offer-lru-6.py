"""offload-evicts-key-of-offer-lru-6 (real upstream bug, PINNED): vLLM 0.11.0.

[PINNED] key 1 of the offer is evicted at step 12: PrepareStore(req=0, keys=(1, 6))
  expected: 'no key of the offer evicted'
  observed: [1]
"""
from properties.families.offload.upstream import load_vllm_offload, new_manager
mods = load_vllm_offload(version='0.11.0')
ReqContext = None
def make(num_chunks, **kwargs):
    return new_manager(mods, num_chunks, **kwargs)
mgr = make(1, enable_events=False)
K = [bytes([i + 1]) * 8 for i in range(8)]

# step 0: PrepareStore(req=0, keys=(6,))
out = mgr.prepare_store([K[6]]); print('store', out and ([K.index(k) for k in out.block_hashes_to_store], list(out.store_spec.block_ids), [K.index(k) for k in out.block_hashes_evicted]))
# step 1: CompleteStore(req=0, keys=(6,), success=True)
mgr.complete_store([K[6]], success=True)
# step 2: PrepareLoad(req=0, keys=(6,))
print('load', list(mgr.prepare_load([K[6]]).block_ids))
# step 3: PrepareLoad(req=0, keys=(6,))
print('load', list(mgr.prepare_load([K[6]]).block_ids))
# step 4: CompleteLoad(req=0, keys=(6,))
mgr.complete_load([K[6]])
# step 5: PrepareLoad(req=1, keys=(6,))
print('load', list(mgr.prepare_load([K[6]]).block_ids))
# step 6: CompleteLoad(req=1, keys=(6,))
mgr.complete_load([K[6]])
# step 7: PrepareLoad(req=0, keys=(6,))
print('load', list(mgr.prepare_load([K[6]]).block_ids))
# step 8: CompleteLoad(req=0, keys=(6,))
mgr.complete_load([K[6]])
# step 9: CompleteLoad(req=0, keys=(6,))
mgr.complete_load([K[6]])
# step 10: PrepareStore(req=0, keys=(1,))
out = mgr.prepare_store([K[1]]); print('store', out and ([K.index(k) for k in out.block_hashes_to_store], list(out.store_spec.block_ids), [K.index(k) for k in out.block_hashes_evicted]))
# step 11: CompleteStore(req=0, keys=(1,), success=True)
mgr.complete_store([K[1]], success=True)
# step 12: PrepareStore(req=0, keys=(1, 6))
out = mgr.prepare_store([K[1], K[6]]); print('store', out and ([K.index(k) for k in out.block_hashes_to_store], list(out.store_spec.block_ids), [K.index(k) for k in out.block_hashes_evicted]))

if __name__ == "__main__":
    # Re-run the same program under the judge; raises the violation above.
    from properties.core.replay import check
    check('properties.upstream:vllm_v011_cpu_offload', {'num_chunks': 1, 'store_threshold': 1, 'max_tracker_size': 64000, 'events': False},
          [{'op': 'prepare_store', 'req': 0, 'keys': [6]}, {'op': 'complete_store', 'req': 0, 'keys': [6], 'success': True}, {'op': 'prepare_load', 'req': 0, 'keys': [6]}, {'op': 'prepare_load', 'req': 0, 'keys': [6]}, {'op': 'complete_load', 'req': 0, 'keys': [6]}, {'op': 'prepare_load', 'req': 1, 'keys': [6]}, {'op': 'complete_load', 'req': 1, 'keys': [6]}, {'op': 'prepare_load', 'req': 0, 'keys': [6]}, {'op': 'complete_load', 'req': 0, 'keys': [6]}, {'op': 'complete_load', 'req': 0, 'keys': [6]}, {'op': 'prepare_store', 'req': 0, 'keys': [1]}, {'op': 'complete_store', 'req': 0, 'keys': [1], 'success': True}, {'op': 'prepare_store', 'req': 0, 'keys': [1, 6]}],
          family='properties.families.offload.family:FAMILY', allocator_type='lru')
