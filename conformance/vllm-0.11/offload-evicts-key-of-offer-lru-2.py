"""offload-evicts-key-of-offer-lru-2 (real upstream bug, PINNED): vLLM 0.11.0.

[PINNED] key 5 of the offer is evicted at step 4: PrepareStore(req=0, keys=(1, 6, 5, 2))
  expected: 'no key of the offer evicted'
  observed: [5, 0]
"""
from properties.families.offload.upstream import load_vllm_offload, new_manager
mods = load_vllm_offload(version='0.11.0')
ReqContext = None
def make(num_chunks, **kwargs):
    return new_manager(mods, num_chunks, **kwargs)
mgr = make(3, enable_events=True)
K = [bytes([i + 1]) * 8 for i in range(8)]

# step 0: PrepareStore(req=0, keys=(5,))
out = mgr.prepare_store([K[5]]); print('store', out and ([K.index(k) for k in out.block_hashes_to_store], list(out.store_spec.block_ids), [K.index(k) for k in out.block_hashes_evicted]))
# step 1: CompleteStore(req=0, keys=(5,), success=True)
mgr.complete_store([K[5]], success=True)
# step 2: PrepareStore(req=0, keys=(0,))
out = mgr.prepare_store([K[0]]); print('store', out and ([K.index(k) for k in out.block_hashes_to_store], list(out.store_spec.block_ids), [K.index(k) for k in out.block_hashes_evicted]))
# step 3: CompleteStore(req=0, keys=(0,), success=True)
mgr.complete_store([K[0]], success=True)
# step 4: PrepareStore(req=0, keys=(1, 6, 5, 2))
out = mgr.prepare_store([K[1], K[6], K[5], K[2]]); print('store', out and ([K.index(k) for k in out.block_hashes_to_store], list(out.store_spec.block_ids), [K.index(k) for k in out.block_hashes_evicted]))

if __name__ == "__main__":
    # Re-run the same program under the judge; raises the violation above.
    from properties.core.replay import check
    check('properties.upstream:vllm_v011_cpu_offload', {'num_chunks': 3, 'store_threshold': 1, 'max_tracker_size': 64000, 'events': True},
          [{'op': 'prepare_store', 'req': 0, 'keys': [5]}, {'op': 'complete_store', 'req': 0, 'keys': [5], 'success': True}, {'op': 'prepare_store', 'req': 0, 'keys': [0]}, {'op': 'complete_store', 'req': 0, 'keys': [0], 'success': True}, {'op': 'prepare_store', 'req': 0, 'keys': [1, 6, 5, 2]}],
          family='properties.families.offload.family:FAMILY', allocator_type='lru')
