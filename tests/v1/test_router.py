"""The v1 pool's KV events judged by NVIDIA Dynamo's router (``properties.families.v1.router``):
the translation into Dynamo's event format, a disagreement on a tiny hand-made event sequence
(vLLM's per-copy removal), the tree rule the judge excuses, and the loader without the wheel.
The tests that need ``ai-dynamo-runtime`` skip, naming the fetch command, when it is absent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from models.core.invariants import Violation
from models.families.v1.pool_model import PoolConfig
from prefixcache.v1.kv_events import AllBlocksCleared, BlockRemoved, BlockStored
from properties.core.plugin import load_expected
from properties.families.v1 import dynamo
from properties.families.v1.family import FAMILY
from properties.families.v1.router import DynamoRouter, external_u64, translate

ROOT = Path(__file__).resolve().parents[2]
needs_dynamo = pytest.mark.skipif(
    dynamo.load_router() is None,
    reason=f"no ai-dynamo-runtime {dynamo.VERSION} wheel cached (`{dynamo.FETCH_COMMAND}`), "
           f"or ${dynamo.SWITCH_ENV}=off")
CONFIG = PoolConfig(num_blocks=8, hash_block_size=2, group_block_sizes=(2,))
H0, H1 = b"\x01" * 32, b"\x02" * 32  # two block hashes (bytes, as the bundled pool's)


@pytest.fixture
def core() -> ModuleType:
    loaded = dynamo.load_router()
    assert loaded is not None, dynamo.status()
    return loaded


def stored(hashes: list[bytes], parent: bytes | None, tokens: list[int]) -> BlockStored:
    return BlockStored(block_hashes=list(hashes), parent_block_hash=parent, token_ids=tokens,
                       block_size=2, lora_id=None, medium="GPU", lora_name=None, group_idx=0)


def test_external_hashes_are_the_u64_int_form_vllm_publishes() -> None:
    assert external_u64(H0) == int.from_bytes(H0[-8:], "big")
    assert external_u64(-1) == (1 << 64) - 1  # a signed int hash, modulo 2**64
    assert external_u64(5) == 5
    with pytest.raises(TypeError):
        external_u64("5")


@needs_dynamo
def test_translation_is_dynamos_event_format(core: ModuleType) -> None:
    group, data = translate(core, stored([H0, H1], None, [7, 7, 8, 8]))
    assert group == 0
    blocks = data["stored"]["blocks"]
    assert data["stored"]["parent_hash"] is None
    assert [b["block_hash"] for b in blocks] == [external_u64(H0), external_u64(H1)]
    # the tokens hash is Dynamo's own local hash of each block's tokens
    assert [b["tokens_hash"] for b in blocks] == core.compute_block_hash_for_seq([7, 7, 8, 8], 2)
    assert translate(core, BlockRemoved(block_hashes=[H1], medium="GPU", group_idx=0)) == (
        0, {"removed": {"block_hashes": [external_u64(H1)]}})
    assert translate(core, AllBlocksCleared()) == (None, "cleared")
    # what Dynamo's tree makes of them: its own dump shows the same shape back
    router = DynamoRouter(core, 1)
    router.apply([stored([H0, H1], None, [7, 7, 8, 8])])
    dumped = [json.loads(e)["event"]["data"]["stored"]
              for e in router.trees[0].dump_tree_as_events()]
    assert sorted(b["block_hash"] for d in dumped for b in d["blocks"]) == sorted(
        [external_u64(H0), external_u64(H1)])
    assert router.matches(0, [H0, H1]) == 2
    router.apply([AllBlocksCleared()])
    assert router.matches(0, [H0, H1]) == 0


@needs_dynamo
def test_a_per_copy_removal_makes_the_router_lose_a_block_the_pool_serves(
        core: ModuleType) -> None:
    # Blocks 1 and 2 both hold H0 (two stores); block 1 is reused: vLLM emits BlockRemoved(H0)
    # for that copy while block 2 still serves it. Dynamo's tree drops the key.
    router = DynamoRouter(core, 1)
    router.apply([stored([H0], None, [7, 7]), stored([H0], None, [7, 7]),
                  BlockRemoved(block_hashes=[H0], medium="GPU", group_idx=0)])
    with pytest.raises(Violation, match=r"Dynamo's router matches 0 block\(s\) where the pool "
                                        r"serves 1 \(a hit the router cannot see"):
        router.check(CONFIG, [[H0]], {(H0, 0): [2]})
    router.check(CONFIG, [[H0]], {})  # where the pool serves nothing, the router agrees


@needs_dynamo
def test_a_subtree_the_tree_dropped_is_dynamos_loss_not_the_pools(core: ModuleType) -> None:
    # The pool evicts H0's block before H1's, then caches H0 again: it serves both, but
    # Dynamo's tree dropped H1 with H0's subtree. Counted as the router's loss, no violation.
    router = DynamoRouter(core, 1)
    router.apply([stored([H0, H1], None, [7, 7, 8, 8]),
                  BlockRemoved(block_hashes=[H0], medium="GPU", group_idx=0),
                  stored([H0], None, [7, 7])])
    assert router.matches(0, [H0, H1]) == 1
    router.check(CONFIG, [[H0, H1]], {(H0, 0): [3], (H1, 0): [2]})
    assert router.losses == 1


def test_without_the_wheel_the_router_is_off_and_says_how_to_fetch(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": str(tmp_path)}
    env.pop(dynamo.SWITCH_ENV, None)
    proc = subprocess.run([sys.executable, "-m", "properties.upstream", "info", "dynamo"],
                          env=env, capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode == 1
    assert proc.stdout.strip() == f"router: none (fetch with `{dynamo.FETCH_COMMAND}`)"


def test_fetch_downloads_the_pinned_wheel_without_dependencies(tmp_path: Path) -> None:
    calls: list[list[str]] = []

    def runner(args: list[str], *, check: bool) -> object:
        calls.append(args)
        (tmp_path / f"ai_dynamo_runtime-{dynamo.VERSION}-cp310-abi3-x.whl").write_bytes(b"")
        return None

    wheel = dynamo.fetch(tmp_path, runner)
    assert wheel.parent == tmp_path
    assert calls and calls[0][-1] == f"ai-dynamo-runtime=={dynamo.VERSION}"
    assert "--no-deps" in calls[0]


def test_an_entry_that_needs_the_router_applies_only_to_runs_that_have_it() -> None:
    entries = load_expected(str(ROOT / "conformance" / "vllm-0.11.xfails.json"))
    entry = next(e for e in entries if e.id == "events-without-extra-keys")
    assert entry.requires == {"dynamo-router"}
    assert entry.applies("0.11.0", frozenset({"dynamo-router"}))
    assert not entry.applies("0.11.0", frozenset())  # met and replayed only with the router
    assert not entry.applies("0.33.0", frozenset({"dynamo-router"}))
    judges = FAMILY.load_target().judges  # the bundled pool: judged by the router when cached
    assert judges == (frozenset({"dynamo-router"}) if dynamo.load_router() else frozenset())
