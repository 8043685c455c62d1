"""Under ``python -O`` (asserts stripped) every misuse still raises its typed error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

_SCRIPT = r"""
import prefixcache as pc
from prefixcache import Device

assert False, "asserts must be stripped in this run"  # never fires under -O
results = []

def expect(error, op):
    try:
        op()
    except error:
        results.append("ok")
    except Exception as exc:  # the wrong error
        results.append(f"wrong {type(exc).__name__}: {exc}")
    else:
        results.append(f"no {error.__name__}")

p = pc.PrefixCachingBlockAllocator(num_blocks=3, block_size=2)
other = pc.PrefixCachingBlockAllocator(num_blocks=3, block_size=2)
full = p.allocate_immutable_block(None, [1, 2])
freed = p.allocate_mutable_block(full)
p.free(freed, keep_block_object=True)
mutable = p.allocate_mutable_block(full)
mutable.append_token_ids([3])
fork = p.fork(mutable)[-1]
foreign = other.allocate_immutable_block(None, [1, 2])
p.allocate_mutable_block(None)  # take the last free block
before = (p.get_num_free_blocks(), dict(p._refcounter._refcounts), list(p._cached_blocks))

expect(pc.DoubleFreeError, lambda: p.free(freed))
expect(pc.InvalidBlockError, lambda: p.free(foreign))
expect(pc.ForkError, lambda: p.fork(freed))
expect(pc.BlockFullError, lambda: mutable.append_token_ids([4, 5]))
expect(pc.ImmutableBlockError, lambda: full.append_token_ids([9]))
expect(pc.NoFreeBlocksError, lambda: p.allocate_immutable_blocks(None, [[5, 6], [7, 8]]))
expect(pc.InvalidArgumentError, lambda: p.allocate_immutable_block(None, [1]))
expect(pc.UnknownBlockIdError, lambda: p.mark_blocks_as_accessed([42], 1.0))
expect(pc.InvalidArgumentError, lambda: pc.PrefixCachingBlockAllocator(2, 0))
expect(pc.InvalidArgumentError, lambda: pc.NaiveBlockAllocator(pc.NaiveBlock, 2, 2, [0, 0]))
expect(AssertionError, lambda: pc.RefCounter([0]).decr(0))
expect(pc.NoFreeBlocksError, lambda: mutable.append_token_ids([4]))  # CoW with no block
after = (p.get_num_free_blocks(), dict(p._refcounter._refcounts), list(p._cached_blocks))
results.append("unchanged" if after == before else f"changed {before} -> {after}")

c = pc.CpuGpuBlockAllocator.create("prefix_caching", 2, 1, 2)
g = c.allocate_immutable_blocks(None, [[1, 2], [3, 4]], Device.GPU)
expect(pc.UnknownDeviceError, lambda: c.get_num_free_blocks(None))
expect(pc.SwapError, lambda: c.swap(g, Device.CPU, Device.GPU))
expect(pc.SwapError, lambda: c.swap(g, Device.GPU, Device.GPU))
expect(pc.NoFreeBlocksError, lambda: c.swap(g, Device.GPU, Device.CPU))
t = pc.BlockTable(2, c)
expect(pc.NoFreeBlocksError, lambda: t.allocate([9, 9, 9, 9, 9]))
expect(pc.InvalidArgumentError, lambda: t.append_token_ids([1]))
print(" ".join(results))
"""


def test_typed_errors_fire_with_asserts_stripped() -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    result = subprocess.run(
        [sys.executable, "-O", "-c", _SCRIPT], capture_output=True, text=True, env=env, check=False
    )
    assert result.returncode == 0, result.stderr
    words = result.stdout.split()
    assert words == ["ok"] * 12 + ["unchanged"] + ["ok"] * 6, result.stdout


def test_package_has_no_runtime_asserts() -> None:
    package = REPO_ROOT / "prefixcache"
    offenders = [
        f"{path.name}:{number}"
        for path in sorted(package.glob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if line.strip().startswith("assert ")
    ]
    assert offenders == []
