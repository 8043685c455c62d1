"""swap-mapping-drops-shared (SWAP/CONTENT, real upstream bug): vLLM 0.8 deviation that the
suite's model does not flag yet (conformance/MODEL_ISSUES.md, section 2), so it has no xfail entry.

Two handles share GPU id 0 (a partial block and its fork). One swap of both to the CPU gives
them two different CPU ids, but CpuGpuBlockAllocator.swap returns {src: dst}, a dict keyed by
the source id: the pair for the first handle is overwritten, so the engine never copies its KV
and that sequence reads uninitialised CPU memory after the swap.

Run from anywhere: python conformance/vllm-0.8/swap-mapping-drops-shared.py
"""
import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root
logging.disable(logging.WARNING)
from properties.families.v0.upstream import load_vllm_v0  # noqa: E402

vllm = load_vllm_v0()
Device = vllm.utils.Device
alloc = vllm.cpu_gpu_block_allocator.CpuGpuBlockAllocator.create("prefix_caching", 4, 4, 2)
b0 = alloc.allocate_mutable_block(None, device=Device.GPU)
b0.append_token_ids([1])
(b1,) = alloc.fork(b0)
mapping = alloc.swap([b0, b1], Device.GPU, Device.CPU)

if __name__ == "__main__":
    print("observed:")
    print("mapping =", mapping)
    print("(b0.block_id, b1.block_id) =", (b0.block_id, b1.block_id))
    missing = {b.block_id for b in (b0, b1)} - set(mapping.values())
    print("CPU ids that hold a sequence but receive no copy:", sorted(missing))
