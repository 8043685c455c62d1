"""offload-touch-order-lru-4 (design deviation, ORDER): vLLM 0.11.0.

[ORDER] the lru policy evicts other keys at step 5: PrepareStore(req=1, keys=(0, 7))
  expected: [3]
  observed: [5]
"""
from properties.families.offload.upstream import load_vllm_offload, new_manager
mods = load_vllm_offload(version='0.11.0')
ReqContext = None
def make(num_chunks, **kwargs):
    return new_manager(mods, num_chunks, **kwargs)
mgr = make(4, enable_events=True)
K = [bytes([i + 1]) * 8 for i in range(8)]

# step 0: NewRequest(req=0, positions=False)
pass  # request 0 arrives (this API has no request contexts)
# step 1: PrepareStore(req=0, keys=(6,))
out = mgr.prepare_store([K[6]]); print('store', out and ([K.index(k) for k in out.block_hashes_to_store], list(out.store_spec.block_ids), [K.index(k) for k in out.block_hashes_evicted]))
# step 2: PrepareStore(req=0, keys=(5, 6, 3))
out = mgr.prepare_store([K[5], K[6], K[3]]); print('store', out and ([K.index(k) for k in out.block_hashes_to_store], list(out.store_spec.block_ids), [K.index(k) for k in out.block_hashes_evicted]))
# step 3: CompleteStore(req=0, keys=(5, 3), success=True)
mgr.complete_store([K[5], K[3]], success=True)
# step 4: Finish(req=0)
mgr.touch([K[3], K[5], K[6]])
# step 5: PrepareStore(req=1, keys=(0, 7))
out = mgr.prepare_store([K[0], K[7]]); print('store', out and ([K.index(k) for k in out.block_hashes_to_store], list(out.store_spec.block_ids), [K.index(k) for k in out.block_hashes_evicted]))

if __name__ == "__main__":
    # Re-run the same program under the judge; raises the violation above.
    from properties.core.replay import check
    check('properties.upstream:vllm_v011_cpu_offload', {'num_chunks': 4, 'store_threshold': 1, 'max_tracker_size': 64000, 'events': True},
          [{'op': 'new_request', 'req': 0, 'positions': False}, {'op': 'prepare_store', 'req': 0, 'keys': [6]}, {'op': 'prepare_store', 'req': 0, 'keys': [5, 6, 3]}, {'op': 'complete_store', 'req': 0, 'keys': [5, 3], 'success': True}, {'op': 'finish', 'req': 0}, {'op': 'prepare_store', 'req': 1, 'keys': [0, 7]}],
          family='properties.families.offload.family:FAMILY', allocator_type='lru')
