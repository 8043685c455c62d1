"""offload-evicts-key-of-offer-lru (real upstream bug, PINNED): vLLM 0.11.0.

[PINNED] key 1 of the offer is evicted at step 2: PrepareStore(req=0, keys=(4, 1, 5, 7))
  expected: 'no key of the offer evicted'
  observed: [1, 3]
"""
from properties.families.offload.upstream import load_vllm_offload, new_manager
mods = load_vllm_offload(version='0.11.0')
ReqContext = None
def make(num_chunks, **kwargs):
    return new_manager(mods, num_chunks, **kwargs)
mgr = make(3, enable_events=True)
K = [bytes([i + 1]) * 8 for i in range(8)]

# step 0: PrepareStore(req=0, keys=(1, 3, 7))
out = mgr.prepare_store([K[1], K[3], K[7]]); print('store', out and ([K.index(k) for k in out.block_hashes_to_store], list(out.store_spec.block_ids), [K.index(k) for k in out.block_hashes_evicted]))
# step 1: CompleteStore(req=0, keys=(1, 3, 7), success=True)
mgr.complete_store([K[1], K[3], K[7]], success=True)
# step 2: PrepareStore(req=0, keys=(4, 1, 5, 7))
out = mgr.prepare_store([K[4], K[1], K[5], K[7]]); print('store', out and ([K.index(k) for k in out.block_hashes_to_store], list(out.store_spec.block_ids), [K.index(k) for k in out.block_hashes_evicted]))

if __name__ == "__main__":
    # Re-run the same program under the judge; raises the violation above.
    from properties.core.replay import check
    check('properties.upstream:vllm_v011_cpu_offload', {'num_chunks': 3, 'store_threshold': 1, 'max_tracker_size': 64000, 'events': True},
          [{'op': 'prepare_store', 'req': 0, 'keys': [1, 3, 7]}, {'op': 'complete_store', 'req': 0, 'keys': [1, 3, 7], 'success': True}, {'op': 'prepare_store', 'req': 0, 'keys': [4, 1, 5, 7]}],
          family='properties.families.offload.family:FAMILY', allocator_type='lru')
