"""offload-evicts-key-of-offer-lru-4 (real upstream bug, PINNED): vLLM 0.11.0.

[PINNED] key 7 of the offer is evicted at step 6: PrepareStore(req=3, keys=(0, 7, 2, 3))
  expected: 'no key of the offer evicted'
  observed: [7, 6]
"""
from properties.families.offload.upstream import load_vllm_offload, new_manager
mods = load_vllm_offload(version='0.11.0')
ReqContext = None
def make(num_chunks, **kwargs):
    return new_manager(mods, num_chunks, **kwargs)
mgr = make(4, enable_events=True)
K = [bytes([i + 1]) * 8 for i in range(8)]

# step 0: PrepareStore(req=0, keys=(0,))
out = mgr.prepare_store([K[0]]); print('store', out and ([K.index(k) for k in out.block_hashes_to_store], list(out.store_spec.block_ids), [K.index(k) for k in out.block_hashes_evicted]))
# step 1: PrepareStore(req=1, keys=(7, 0))
out = mgr.prepare_store([K[7], K[0]]); print('store', out and ([K.index(k) for k in out.block_hashes_to_store], list(out.store_spec.block_ids), [K.index(k) for k in out.block_hashes_evicted]))
# step 2: CompleteStore(req=1, keys=(7,), success=True)
mgr.complete_store([K[7]], success=True)
# step 3: PrepareStore(req=1, keys=(0, 4))
out = mgr.prepare_store([K[0], K[4]]); print('store', out and ([K.index(k) for k in out.block_hashes_to_store], list(out.store_spec.block_ids), [K.index(k) for k in out.block_hashes_evicted]))
# step 4: PrepareStore(req=3, keys=(4, 6))
out = mgr.prepare_store([K[4], K[6]]); print('store', out and ([K.index(k) for k in out.block_hashes_to_store], list(out.store_spec.block_ids), [K.index(k) for k in out.block_hashes_evicted]))
# step 5: CompleteStore(req=3, keys=(6,), success=True)
mgr.complete_store([K[6]], success=True)
# step 6: PrepareStore(req=3, keys=(0, 7, 2, 3))
out = mgr.prepare_store([K[0], K[7], K[2], K[3]]); print('store', out and ([K.index(k) for k in out.block_hashes_to_store], list(out.store_spec.block_ids), [K.index(k) for k in out.block_hashes_evicted]))

if __name__ == "__main__":
    # Re-run the same program under the judge; raises the violation above.
    from properties.core.replay import check
    check('properties.upstream:vllm_v011_cpu_offload', {'num_chunks': 4, 'store_threshold': 1, 'max_tracker_size': 64000, 'events': True},
          [{'op': 'prepare_store', 'req': 0, 'keys': [0]}, {'op': 'prepare_store', 'req': 1, 'keys': [7, 0]}, {'op': 'complete_store', 'req': 1, 'keys': [7], 'success': True}, {'op': 'prepare_store', 'req': 1, 'keys': [0, 4]}, {'op': 'prepare_store', 'req': 3, 'keys': [4, 6]}, {'op': 'complete_store', 'req': 3, 'keys': [6], 'success': True}, {'op': 'prepare_store', 'req': 3, 'keys': [0, 7, 2, 3]}],
          family='properties.families.offload.family:FAMILY', allocator_type='lru')
