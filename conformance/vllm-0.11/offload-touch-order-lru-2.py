"""offload-touch-order-lru-2 (design deviation, ORDER): vLLM 0.11.0.

[ORDER] the lru policy evicts other keys at step 4: PrepareStore(req=4, keys=(4, 7))
  expected: [6]
  observed: [5]
"""
from properties.families.offload.upstream import load_vllm_offload, new_manager
mods = load_vllm_offload(version='0.11.0')
ReqContext = None
def make(num_chunks, **kwargs):
    return new_manager(mods, num_chunks, **kwargs)
mgr = make(4, enable_events=True)
K = [bytes([i + 1]) * 8 for i in range(8)]

# step 0: PrepareStore(req=1, keys=(2, 3, 4, 7))
out = mgr.prepare_store([K[2], K[3], K[4], K[7]]); print('store', out and ([K.index(k) for k in out.block_hashes_to_store], list(out.store_spec.block_ids), [K.index(k) for k in out.block_hashes_evicted]))
# step 1: CompleteStore(req=1, keys=(2, 3, 4, 7), success=False)
mgr.complete_store([K[2], K[3], K[4], K[7]], success=False)
# step 2: PrepareStore(req=4, keys=(5, 6, 0))
out = mgr.prepare_store([K[5], K[6], K[0]]); print('store', out and ([K.index(k) for k in out.block_hashes_to_store], list(out.store_spec.block_ids), [K.index(k) for k in out.block_hashes_evicted]))
# step 3: CompleteStore(req=4, keys=(5, 6, 0), success=True)
mgr.complete_store([K[5], K[6], K[0]], success=True)
# step 4: PrepareStore(req=4, keys=(4, 7))
out = mgr.prepare_store([K[4], K[7]]); print('store', out and ([K.index(k) for k in out.block_hashes_to_store], list(out.store_spec.block_ids), [K.index(k) for k in out.block_hashes_evicted]))

if __name__ == "__main__":
    # Re-run the same program under the judge; raises the violation above.
    from properties.core.replay import check
    check('properties.upstream:vllm_v011_cpu_offload', {'num_chunks': 4, 'store_threshold': 1, 'max_tracker_size': 64000, 'events': True},
          [{'op': 'prepare_store', 'req': 1, 'keys': [2, 3, 4, 7]}, {'op': 'complete_store', 'req': 1, 'keys': [2, 3, 4, 7], 'success': False}, {'op': 'prepare_store', 'req': 4, 'keys': [5, 6, 0]}, {'op': 'complete_store', 'req': 4, 'keys': [5, 6, 0], 'success': True}, {'op': 'prepare_store', 'req': 4, 'keys': [4, 7]}],
          family='properties.families.offload.family:FAMILY', allocator_type='lru')
