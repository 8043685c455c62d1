"""The pool's KV events judged by a real router: NVIDIA Dynamo's ``RadixTree``.

Beside the model's own replay (:mod:`models.families.v1.events`, a key set), every
``take_events`` step also feeds the same events to one Dynamo ``RadixTree`` per KV cache group
(worker 0), the way Dynamo's vLLM publisher relays them, and then asks it, for each request's
block hashes, how many leading blocks worker 0 holds (``find_matches``). That count must be the
number of leading blocks the pool can serve according to the model (the leading run of the
request's keys in the cache map): the guarantee a KV-aware router needs from the events
(vllm-project/vllm#55092, vllm-project/vllm#48933). A disagreement is a CACHE
:class:`Violation` naming both sides.

The translation (:func:`translate`), one Dynamo ``KvCacheEvent`` (JSON, as ``apply_event``
deserializes it; ``dump_tree_as_events`` shows the same shape) per vLLM event:

- ``BlockStored`` -> ``{"stored": {"parent_hash": P, "blocks": [{"block_hash": B,
  "tokens_hash": T}, ...]}}``. ``B`` and ``P`` are Dynamo's u64 "external" hashes of vLLM's
  block hashes (:func:`external_u64`: an int hash modulo 2**64, which is the int form vLLM
  publishes by default; a bytes hash, the low 64 bits of its big-endian value, the same int
  form). ``T`` is the block's local hash as Dynamo computes it,
  ``compute_block_hash_for_seq(block's token_ids, block_size, lora_name=, cache_namespace=)``,
  with the block's ``extra_keys`` entry (LoRA name, multimodal identifiers, salt, prompt-embed
  digests: whatever keyed it in vLLM) as the namespace when it has one (0.11's events carry no
  ``extra_keys`` and no ``lora_name``: its ``lora_id`` stands for the name). Dynamo's tree keys a
  node's children by ``T``, so two vLLM keys under one parent always get distinct nodes (the
  judge asks about the events' structure, not about Dynamo's own parsing of vLLM's extra keys,
  which changes between Dynamo releases). With hash lookahead (vLLM 0.34's
  ``num_hash_lookahead_tokens``) the block's ``lookahead_token_ids`` entry joins the namespace:
  the key covers those tokens, and two blocks of equal tokens under one parent that differ only
  there are two keys.
- ``BlockRemoved`` -> ``{"removed": {"block_hashes": [B, ...]}}``.
- ``AllBlocksCleared`` -> ``"cleared"``, applied to every group's tree.

Events Dynamo's tree refuses (``apply_event`` raises ``RuntimeError``: a removal of a block it
does not hold, a store under a parent it does not hold) are skipped, as its router skips them
with a warning; the model's replay already judges them, the comparison judges what follows.
A request's query is the local hashes the router learnt from the events for its keys, up to the
first key no event announced (the router cannot know a block nobody announced).

Dynamo's tree is not a key set, and two of its rules lose keys the events never removed:
removing a block drops its whole subtree, and a store under a parent it does not hold is
refused (vLLM's pool may evict a parent before its child, and keys a child after evicting its
parent; the pool still serves the child once the parent is cached again). The judge follows
those two rules from the events alone (``held``, ``lost``) and expects the router to match the
leading run of the request's keys that the pool serves and that the rules did not lose; a
shorter match than the pool's for that reason is Dynamo's deviation (counted in ``losses``,
``docs/CONTRACT.md``), not the pool's. A key one removal dropped while the pool still serves it
is not excused: one removal drops a key in Dynamo's tree however many blocks stored it, so
per-copy removals (vLLM's ``removed-per-copy``) make the router lose blocks the pool serves.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from types import ModuleType
from typing import Any

from models.core.invariants import Violation
from models.families.v1.events import external
from models.families.v1.invariants import Family
from models.families.v1.pool_model import Key, PoolConfig
from properties.families.v1 import dynamo

_MASK = (1 << 64) - 1
WORKER = 0


def external_u64(block_hash: object) -> int:
    """Dynamo's u64 external hash of a vLLM block hash (int or bytes; see the module doc)."""
    if isinstance(block_hash, int):
        return block_hash & _MASK
    if isinstance(block_hash, bytes | bytearray):
        return external(bytes(block_hash))
    raise TypeError(f"a block hash is int or bytes, not {type(block_hash).__name__}")


def local_hash(core: ModuleType, tokens: Sequence[int], block_size: int,
               lora_name: str | None, extra: object) -> int:
    """Dynamo's local (tokens) hash of one block."""
    namespace = None if extra is None or extra == () else repr(tuple(extra))  # type: ignore[arg-type]
    out: list[int] = core.compute_block_hash_for_seq(list(tokens), block_size,
                                                      lora_name=lora_name,
                                                      cache_namespace=namespace)
    return out[0]


def translate(core: ModuleType, event: Any) -> tuple[int | None, Any]:
    """``(group or None for every group, Dynamo event data)`` of one vLLM KV event."""
    kind = type(event).__name__
    group = getattr(event, "group_idx", None) or 0
    if kind == "BlockStored":
        size = event.block_size
        tokens = list(event.token_ids)
        extras: list[Any] = (getattr(event, "extra_keys", None)
                             or [None] * len(event.block_hashes))
        ahead = getattr(event, "lookahead_token_ids", None)
        if ahead is not None:  # the key covers the tokens after the block too
            extras = [(None if i >= len(extras) else extras[i], tuple(ahead[i]))
                      for i in range(len(event.block_hashes))]
        lora = getattr(event, "lora_name", None)
        if lora is None and getattr(event, "lora_id", None) is not None:
            lora = f"lora-id-{event.lora_id}"  # 0.11's events name the adapter by id only
        parent = event.parent_block_hash
        blocks = [{"block_hash": external_u64(h),
                   "tokens_hash": local_hash(core, tokens[i * size:(i + 1) * size], size,
                                             lora, extras[i] if i < len(extras) else None)}
                  for i, h in enumerate(event.block_hashes)]
        return group, {"stored": {"parent_hash": None if parent is None
                                  else external_u64(parent), "blocks": blocks}}
    if kind == "BlockRemoved":
        return group, {"removed": {"block_hashes": [external_u64(h)
                                                    for h in event.block_hashes]}}
    if kind == "AllBlocksCleared":
        return None, "cleared"
    raise Violation(Family.TARGET, f"unknown KV event {kind}", observed=event)


class DynamoRouter:
    """One ``RadixTree`` per KV cache group, fed the pool's events as worker 0."""

    def __init__(self, core: ModuleType, groups: int) -> None:
        self.core = core
        self.trees = [core.RadixTree() for _ in range(groups)]
        self.local: list[dict[int, int]] = [{} for _ in range(groups)]  # external -> tokens
        self.event_id = 0
        self.refused: list[str] = []  # events Dynamo's tree skipped (why), newest last
        # Dynamo's tree rules, from the events alone: which keys it holds (and under which
        # parent), and which it lost by its own rules while the events never removed them.
        self.held: list[dict[int, int | None]] = [{} for _ in range(groups)]
        self.lost: list[set[int]] = [set() for _ in range(groups)]
        self.losses = 0  # checks where the router's own rules cost a hit the pool serves

    def apply(self, events: Iterable[Any]) -> None:
        for event in events:
            group, data = translate(self.core, event)
            self._follow(group, data)
            for g in range(len(self.trees)) if group is None else (group,):
                self.event_id += 1
                payload = json.dumps({"event_id": self.event_id, "data": data}).encode()
                try:
                    self.trees[g].apply_event(WORKER, payload)
                except RuntimeError as exc:  # "Failed to apply event: ..." (ValueError, a
                    self.refused.append(str(exc))  # payload it cannot read, propagates)

    def _follow(self, group: int | None, data: Any) -> None:
        """Dynamo's tree rules on one event: a store under a parent the tree does not hold is
        refused; removing a block drops its whole subtree; a clear drops everything."""
        if group is None:
            for held, lost in zip(self.held, self.lost, strict=True):
                held.clear()
                lost.clear()
            return
        held, lost = self.held[group], self.lost[group]
        if "stored" in data:
            parent = data["stored"]["parent_hash"]
            blocks = [b["block_hash"] for b in data["stored"]["blocks"]]
            for block in data["stored"]["blocks"]:
                self.local[group][block["block_hash"]] = block["tokens_hash"]
            if parent is not None and parent not in held:
                lost.update(b for b in blocks if b not in held)
                return
            for b in blocks:
                held.setdefault(b, parent)
                lost.discard(b)
                parent = b
            return
        for b in data["removed"]["block_hashes"]:
            if b not in held:
                continue
            gone = {b}
            while True:
                more = {c for c, p in held.items() if p in gone and c not in gone}
                if not more:
                    break
                gone |= more
            for c in gone:
                del held[c]
            lost.discard(b)
            lost.update(gone - {b})

    def matches(self, group: int, keys: Sequence[object]) -> int:
        """How many of ``keys``' leading blocks the router says worker 0 holds."""
        query: list[int] = []
        for key in keys:
            local = self.local[group].get(external_u64(key))
            if local is None:
                break
            query.append(local)
        if not query:
            return 0
        scores = self.trees[group].find_matches(query).scores
        return int(sum(n for (worker, _rank), n in scores.items() if worker == WORKER))

    def check(self, config: PoolConfig, hashes: Sequence[Sequence[bytes]],
              keys: Mapping[Key, Sequence[int]]) -> None:
        """For each request and group: the router's match equals the leading run of the
        request's keys the cache map holds."""
        for r, hs in enumerate(hashes):
            for g in range(len(self.trees)):
                scale = config.scale(g)
                chain = [hs[(i + 1) * scale - 1] for i in range(len(hs) // scale)]
                served = 0
                while served < len(chain) and keys.get((chain[served], g)):
                    served += 1
                # The router's own rules may lose a key the events never removed (a subtree
                # under a removed block, a store under a removed parent): Dynamo's deviation
                # from a key set, excused (counted), not the pool's.
                reachable = 0
                while reachable < served and external_u64(chain[reachable]) not in self.lost[g]:
                    reachable += 1
                routed = self.matches(g, chain)
                if routed == reachable:
                    self.losses += reachable < served
                    continue
                why = ("routes to a worker that lacks the KV" if routed > reachable
                       else "a hit the router cannot see")
                raise Violation(Family.CACHE, f"event replay: Dynamo's router matches {routed} "
                                f"block(s) where the pool serves {served} ({why}; request {r}, "
                                f"group {g})", expected={"served": served, "reachable by "
                                "Dynamo's tree rules": reachable},
                                observed={"routed": routed, "refused": self.refused[-3:]})


def open_router(config: PoolConfig) -> DynamoRouter | None:
    """A router for a pool of ``config``, when events are on and Dynamo's runtime loads."""
    if not config.events:
        return None
    core = dynamo.load_router()
    return None if core is None else DynamoRouter(core, len(config.group_block_sizes))
