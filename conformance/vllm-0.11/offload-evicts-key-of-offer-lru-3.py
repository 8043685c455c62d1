"""offload-evicts-key-of-offer-lru-3 (real upstream bug, PINNED): vLLM 0.11.0.

[PINNED] key 3 of the offer is evicted at step 12: PrepareStore(req=2, keys=(3, 2, 4, 1))
  expected: 'no key of the offer evicted'
  observed: [7, 3]
"""
from properties.families.offload.upstream import load_vllm_offload, new_manager
mods = load_vllm_offload(version='0.11.0')
ReqContext = None
def make(num_chunks, **kwargs):
    return new_manager(mods, num_chunks, **kwargs)
mgr = make(3, enable_events=False)
K = [bytes([i + 1]) * 8 for i in range(8)]

# step 0: PrepareStore(req=0, keys=(1,))
out = mgr.prepare_store([K[1]]); print('store', out and ([K.index(k) for k in out.block_hashes_to_store], list(out.store_spec.block_ids), [K.index(k) for k in out.block_hashes_evicted]))
# step 1: CompleteStore(req=0, keys=(1,), success=True)
mgr.complete_store([K[1]], success=True)
# step 2: PrepareLoad(req=1, keys=(1,))
print('load', list(mgr.prepare_load([K[1]]).block_ids))
# step 3: CompleteLoad(req=1, keys=(1,))
mgr.complete_load([K[1]])
# step 4: PrepareLoad(req=0, keys=(1,))
print('load', list(mgr.prepare_load([K[1]]).block_ids))
# step 5: CompleteLoad(req=0, keys=(1,))
mgr.complete_load([K[1]])
# step 6: PrepareStore(req=0, keys=(0,))
out = mgr.prepare_store([K[0]]); print('store', out and ([K.index(k) for k in out.block_hashes_to_store], list(out.store_spec.block_ids), [K.index(k) for k in out.block_hashes_evicted]))
# step 7: CompleteStore(req=0, keys=(0,), success=True)
mgr.complete_store([K[0]], success=True)
# step 8: PrepareLoad(req=0, keys=(0,))
print('load', list(mgr.prepare_load([K[0]]).block_ids))
# step 9: CompleteLoad(req=0, keys=(0,))
mgr.complete_load([K[0]])
# step 10: PrepareStore(req=1, keys=(7, 3, 2))
out = mgr.prepare_store([K[7], K[3], K[2]]); print('store', out and ([K.index(k) for k in out.block_hashes_to_store], list(out.store_spec.block_ids), [K.index(k) for k in out.block_hashes_evicted]))
# step 11: CompleteStore(req=1, keys=(7, 3, 2), success=True)
mgr.complete_store([K[7], K[3], K[2]], success=True)
# step 12: PrepareStore(req=2, keys=(3, 2, 4, 1))
out = mgr.prepare_store([K[3], K[2], K[4], K[1]]); print('store', out and ([K.index(k) for k in out.block_hashes_to_store], list(out.store_spec.block_ids), [K.index(k) for k in out.block_hashes_evicted]))

if __name__ == "__main__":
    # Re-run the same program under the judge; raises the violation above.
    from properties.core.replay import check
    check('properties.upstream:vllm_v011_cpu_offload', {'num_chunks': 3, 'store_threshold': 1, 'max_tracker_size': 64000, 'events': False},
          [{'op': 'prepare_store', 'req': 0, 'keys': [1]}, {'op': 'complete_store', 'req': 0, 'keys': [1], 'success': True}, {'op': 'prepare_load', 'req': 1, 'keys': [1]}, {'op': 'complete_load', 'req': 1, 'keys': [1]}, {'op': 'prepare_load', 'req': 0, 'keys': [1]}, {'op': 'complete_load', 'req': 0, 'keys': [1]}, {'op': 'prepare_store', 'req': 0, 'keys': [0]}, {'op': 'complete_store', 'req': 0, 'keys': [0], 'success': True}, {'op': 'prepare_load', 'req': 0, 'keys': [0]}, {'op': 'complete_load', 'req': 0, 'keys': [0]}, {'op': 'prepare_store', 'req': 1, 'keys': [7, 3, 2]}, {'op': 'complete_store', 'req': 1, 'keys': [7, 3, 2], 'success': True}, {'op': 'prepare_store', 'req': 2, 'keys': [3, 2, 4, 1]}],
          family='properties.families.offload.family:FAMILY', allocator_type='lru')
