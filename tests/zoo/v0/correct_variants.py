"""The false-alarm zoo, v0: allocators that are *correct but different*.

Each variant is the bundled package ``prefixcache/`` with one small patch (the mutant zoo's
machinery, :mod:`tests.zoo.patching`) that takes a choice the contract leaves open
(docs/CONTRACT.md, the model in ``models/families/v0/``) another way than the bundled allocator
does. The suite must pass every one of them: a violation here is a false alarm, a rule stricter
than its reason. ``tests/test_correct_variants.py`` runs them through the conformance machines
and shows, for each, a short program whose observable results differ from the bundled
allocator's (so none is accidentally the bundled allocator itself).

``tests.zoo.v0.correct_variants:<name>`` is each variant's target spec (the factory is a module
attribute, as in :mod:`tests.zoo.v0.broken`); each claims what the bundled package claims.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tests.zoo.patching import Patch, claims, factory, register
from tests.zoo.v0.broken import BLOCK, EVICTOR, SEQUENCE

_PCB = "prefix_caching_block"


@dataclass(frozen=True, slots=True)
class Variant:
    """A correct allocator: its patches of the reference, the open choice it takes, and the
    machines that exercise that choice."""

    name: str
    patches: tuple[Patch, ...]
    choice: str
    checks: tuple[str, ...] = (BLOCK, SEQUENCE)

    @property
    def spec(self) -> str:
        return f"{__name__}:{self.name}"


def _alloc(method: str, find: str, replace: str) -> tuple[Patch, ...]:
    return (Patch(_PCB, f"PrefixCachingBlockAllocator.{method}", find, replace),)


VARIANTS: tuple[Variant, ...] = (
    # Any hashless-free id may be handed out (models.families.v0.fresh_ids): take the newest
    # end of the free deque instead of the oldest.
    Variant("fresh_id_from_back", _alloc(
        "_take_fresh_id", "block_id = free_ids.popleft()",
        "block_id = free_ids.pop()  # VARIANT: the other end of the free deque"),
        "a fresh id comes from the other end of the free deque"),
    # Freed hashless ids queue behind the never-used ones (FIFO reuse) instead of in front.
    Variant("freed_id_to_back", _alloc(
        "_release", "self._hashless_allocator._free_block_indices.appendleft(block_id)",
        "self._hashless_allocator._free_block_indices.append(block_id)  # VARIANT: FIFO"),
        "a freed hashless id is reused last, not first"),
    # A cache reset puts the ids it frees behind the free ones.
    Variant("reset_ids_to_back", _alloc(
        "reset_prefix_cache", "free_ids.appendleft(tracker.block_id)",
        "free_ids.append(tracker.block_id)  # VARIANT: behind the free ids"),
        "reset_prefix_cache queues the ids it frees behind the free ones"),
    # Full eviction ties (same time, same depth) are open (models.families.v0.lru): the
    # newest candidate goes first instead of the oldest.
    Variant("evictor_full_ties_newest_first", (Patch(
        "evictor", "LRUEvictor.add", "| self._next_order << 64",
        "| (_FIELD_MASK - self._next_order) << 64  # VARIANT: newest of a full tie first"),),
        "a full eviction tie goes to the newest candidate", (BLOCK, SEQUENCE, EVICTOR)),
    # ``add`` of a candidate: a typed refusal or an overwrite (models.families.v0.evictor_model).
    Variant("evictor_readd_overwrites", (Patch(
        "evictor", "LRUEvictor.add",
        'raise InvalidArgumentError(f"block {block_id} is already an eviction candidate")',
        "pass  # VARIANT: a re-add overwrites the candidate (its old key goes stale)"),),
        "the evictor's add of a candidate overwrites it instead of refusing", (EVICTOR,)),
    # Any collision-resistant content hash (docs/CONTRACT.md): SHA-256 truncated to 128 bits
    # instead of personalised BLAKE2b.
    Variant("block_hash_sha256", (
        Patch("hashing", "", "_BLOCK_STATE = hashlib.blake2b(digest_size=DIGEST_SIZE, "
              "person=_BLOCK_PERSON)",
              "_BLOCK_STATE = hashlib.sha256(_BLOCK_PERSON)  # VARIANT: truncated SHA-256"),
        Patch("hashing", "hash_block_tokens", 'return int.from_bytes(state.digest(), "big")',
              'return int.from_bytes(state.digest()[:DIGEST_SIZE], "big")')),
        "block hashes are truncated SHA-256, not BLAKE2b"),
    # An unpinned misuse only has to be refused with a typed error that changes nothing
    # (models.families.v0.error_classes): another class of the package's misuse errors.
    Variant("overflow_refused_as_invalid_argument", (Patch(
        _PCB, "PrefixCachingBlock._append",
        'raise BlockFullError(f"{len(tokens)} tokens do not fit {empty} empty slots")',
        'raise InvalidArgumentError(f"{len(tokens)} tokens do not fit {empty} empty slots")'
        "  # VARIANT"),),
        "an overflowing append is refused with InvalidArgumentError, not BlockFullError"),
)

BY_NAME: dict[str, Variant] = {v.name: v for v in VARIANTS}

for _variant in VARIANTS:
    register(_variant.name, _variant.patches)
    globals()[_variant.name] = factory(_variant.name, __name__)


def prefixcache_claims(target_factory: Any) -> dict[str, Any]:
    """Claims of a variant's factory: those of its patched copy of the package."""
    return claims(getattr(target_factory, "__name__", "?"))
