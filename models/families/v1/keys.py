"""The key contract: a block's key names exactly the KV of the prefix it ends.

The KV of positions ``[0, end)`` depends on the tokens, the LoRA adapter, the cache salt, the
multimodal items placed there (content identifier and offset) and the prompt embeddings of
those positions. Two prefixes that differ in any of these must never share a key (HASH);
equal prefixes should share one, or hits are lost (HIT).

With hash lookahead (``num_hash_lookahead_tokens = L``, speculative decoding) the KV a block
holds at its last position depends on the ``L`` tokens after it (the drafter's), so the key of
the prefix ending at ``end`` names the identity of ``[0, end + L)``: a block is keyed only once
its lookahead tokens exist, and two requests equal up to ``end`` but not in the next ``L``
tokens (or in the inputs placed there) must not share it.
"""

from __future__ import annotations

from collections.abc import Sequence

from models.core.invariants import Violation
from models.families.v1.invariants import Family
from models.families.v1.ops import Req

Identity = tuple[object, ...]


def prefix_identity(req: Req, end: int) -> Identity:
    """Everything the KV of ``req``'s first ``end`` tokens depends on."""
    mm = tuple((ident, off) for ident, off, length in req.mm if off < end)
    embeds = None if req.embeds is None else req.embeds[:end]
    return (req.tokens[:end], req.lora, req.salt, mm, embeds)


def check_keys(reqs: Sequence[Req], hashes: Sequence[Sequence[bytes]], hash_block_size: int,
               embeds_keyed: bool = True, lookahead: int = 0) -> None:
    """Check every pair of (request, prefix) keys; ``hashes[r]`` are request ``r``'s.

    ``embeds_keyed``: whether the release keys prompt embeddings (requests carrying them are
    then included; a release without the feature is not given any). ``lookahead``: the
    pool's ``num_hash_lookahead_tokens`` (see the module docstring).
    """
    seen: dict[bytes, tuple[Identity, int, int]] = {}
    by_identity: dict[Identity, tuple[bytes, int, int]] = {}
    for r, (req, hs) in enumerate(zip(reqs, hashes, strict=True)):
        expected_len = max(len(req.tokens) - lookahead, 0) // hash_block_size
        if len(hs) != expected_len:
            raise Violation(Family.HASH, f"request {r}: number of block hashes",
                            expected=expected_len, observed=len(hs))
        for i, h in enumerate(hs):
            ident = prefix_identity(req, (i + 1) * hash_block_size + lookahead)
            if h in seen and seen[h][0] != ident:
                _, r0, i0 = seen[h]
                raise Violation(Family.HASH, f"different prefixes share a key: request {r0} "
                                f"block {i0} and request {r} block {i}",
                                expected=seen[h][0], observed=ident)
            seen.setdefault(h, (ident, r, i))
            if ident in by_identity and by_identity[ident][0] != h:
                _, r0, i0 = by_identity[ident]
                raise Violation(Family.HIT, f"equal prefixes get different keys: request {r0} "
                                f"block {i0} and request {r} block {i}", observed=ident)
            by_identity.setdefault(ident, (h, r, i))
