"""Hash quality: the collision resistance of a target's block keys, checked directly at scale.

A content hash that collides only beyond the few dozen blocks one example creates (a truncated
digest, a 16- or 32-bit hash) passes every state machine. This check reads the keys the target
really uses, the ``content_hash`` of full immutable blocks it allocates (through the adapter),
for thousands of contents at once:

- *distinct contents*: seeded random first blocks, counting blocks, and one block's tokens after
  many different prefixes (the chained key); every key is compared with every other one;
- *near-miss pairs*: each base block against itself with one token moved by one, negated,
  ``-1`` against ``-2``, shifted by ``2**61 - 1`` (CPython's integer-hash modulus) or ``2**64``,
  and two tokens swapped; and one block after such near-miss prefixes;
- *the values' range*: over the distinct first blocks, the spread ``max - min`` of the keys must
  span at least :data:`MIN_BITS` bits (a uniform b-bit key over thousands of values spans b bits
  with overwhelming probability). A narrower key is searched further, by the birthday bound,
  for an actual collision.

Contract: different contents (prefix, tokens) never share a key. A finding is a HASH
:class:`~models.core.invariants.Violation` carrying a two-allocation program that replays it under
the oracle (:func:`finding_program`); a key that is only narrow (no collision within the search cap)
is reported with its spread and no program. A finding carries its size (:func:`measures`: the
contents of the whole search that share a key with a different one, and the keys' spread in
bits), so an adopted HASH entry accepts only a key no weaker than it was. Deterministic: every
random choice comes from ``random.Random(SEED)``.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from models.core.invariants import (
    COLLIDING_CONTENTS,
    KEY_SPREAD_BITS,
    LOWER_IS_WORSE,
    Measure,
    Violation,
)
from models.families.v0 import operations as ops
from models.families.v0.capabilities import Capabilities, Config
from models.families.v0.invariants import Family
from models.families.v0.operations import Op
from properties.core.replay import run_program
from properties.core.targets import Target
from properties.families.v0.adapter import FamilyAdapter

BLOCK_SIZE = 4
DISTINCT = 2048  # random first blocks (plus COUNTING counting blocks)
COUNTING = 512
PREFIXES = 512  # one block after this many different prefixes
NEAR_BASES = 256  # base blocks of the near-miss pairs
MIN_BITS = 56  # the least spread a collision-resistant key shows over DISTINCT values
BIRTHDAY_CAP = 1 << 17  # most contents the escalation allocates (one pool)
SEED = 0x5EED
MERSENNE_61 = (1 << 61) - 1
_TOKEN_RANGE = 1 << 17  # a vocabulary's worth of token ids

#: A block's content: its predecessor's tokens (None for a first block) and its own.
Content = tuple[tuple[int, ...] | None, tuple[int, ...]]


@dataclass(frozen=True, slots=True)
class Collision:
    """Two different contents the target keys alike, and how the search found them."""

    first: Content
    second: Content
    key: int
    where: str


def _random_block(rng: random.Random) -> tuple[int, ...]:
    return tuple(rng.randrange(_TOKEN_RANGE) for _ in range(BLOCK_SIZE))


def near_misses(base: tuple[int, ...]) -> Iterator[tuple[str, tuple[int, ...]]]:
    """Variants of ``base`` a weak key confuses with it (each differs from ``base``)."""
    t0, rest = base[0], base[1:]
    yield "-1 against -2", (-2, *rest) if t0 == -1 else (-1, *rest)
    yield "token + 1", (t0 + 1, *rest)
    yield "token - 1", (t0 - 1, *rest)
    if t0:
        yield "token negated", (-t0, *rest)
    yield "token + 2**61 - 1", (t0 + MERSENNE_61, *rest)
    yield "token + 2**64", (t0 + (1 << 64), *rest)
    if base[0] != base[1]:
        yield "two tokens swapped", (base[1], base[0], *base[2:])


def _searched(rng: random.Random) -> Iterator[tuple[str, list[Content]]]:
    """The groups of contents searched, in order: within a group every content differs."""
    firsts: list[Content] = [(None, _random_block(rng)) for _ in range(DISTINCT)]
    yield "distinct first blocks", firsts
    yield "counting blocks", [(None, tuple(range(i, i + BLOCK_SIZE))) for i in range(COUNTING)]
    tail = _random_block(rng)
    yield "one block after different prefixes", [
        (_random_block(rng), tail) for _ in range(PREFIXES)]
    for k in range(NEAR_BASES):
        base = (-1, *_random_block(rng)[1:]) if k % 4 == 0 else _random_block(rng)
        yield f"near misses of {base}", [(None, base), *(
            (None, variant) for _, variant in near_misses(base))]
        if k % 4 == 1:  # the chained key: one block after near-miss prefixes
            yield f"one block after near misses of {base}", [(base, tail), *(
                (variant, tail) for _, variant in near_misses(base))]


class KeySource:
    """The target's block keys: each content allocated as immutable block(s) on a fresh GPU
    pool big enough to hold them all, its last block's ``content_hash`` read back."""

    def __init__(self, target: Target) -> None:
        self.target = target

    def __call__(self, contents: Sequence[Content]) -> list[int | None]:
        blocks = sum(1 if prev is None else 2 for prev, _ in contents)
        adapter: FamilyAdapter = self.target.adapter(Config(BLOCK_SIZE, blocks, 0,
                                                             self.target.caps))
        return adapter.block_keys(contents)


def observable(target: Target) -> str | None:
    """Why the target's block keys cannot be checked (None: they can): a naive allocator keys
    nothing, and blocks without ``content_hash`` show no key."""
    if not target.caps.prefix_caching:
        return "a naive allocator keys no block"
    adapter = target.adapter(Config(BLOCK_SIZE, 1, 0, target.caps))
    block = adapter.alloc.allocate_mutable_block(prev_block=None, device=adapter.device_enum.GPU)
    if not hasattr(block, "content_hash"):
        return "the target's blocks have no content_hash"
    return None


def _collision(keys: Sequence[int | None], contents: Sequence[Content], where: str,
               seen: dict[int, Content]) -> Collision | None:
    """The first content whose key an earlier, different content (of any group: ``seen``
    holds them all) has."""
    for key, content in zip(keys, contents, strict=True):
        if key is None:
            continue
        other = seen.setdefault(key, content)
        if other != content:
            return Collision(other, content, key, where)
    return None


def spread_bits(keys: Sequence[int | None]) -> int:
    """Bits spanned by the keys: ``(max - min).bit_length()`` (0 for fewer than two)."""
    values = [k for k in keys if k is not None]
    return (max(values) - min(values)).bit_length() if len(values) > 1 else 0


def search(target: Target) -> Collision | Violation | None:
    """A collision of the target's block keys, a range finding (a Violation without program)
    when the keys are narrow but no collision was found within the cap, or None."""
    keys_of = KeySource(target)
    rng = random.Random(SEED)
    seen: dict[int, Content] = {}
    narrow = None
    for where, contents in _searched(rng):
        keys = keys_of(contents)
        found = _collision(keys, contents, where, seen)
        if found is not None:
            return found
        if where == "distinct first blocks":
            bits = spread_bits(keys)
            if bits < MIN_BITS:
                narrow = bits
                break
    if narrow is None:
        return None
    count = min(BIRTHDAY_CAP, 1 << (narrow // 2 + 4))
    contents = list(dict.fromkeys((None, _random_block(rng)) for _ in range(count)))
    found = _collision(keys_of(contents), contents, f"{len(contents)} random blocks", seen)
    if found is not None:
        return found
    return Violation(Family.HASH, f"block keys span {narrow} bits over {DISTINCT} distinct "
                     f"first blocks (a collision-resistant key spans at least {MIN_BITS}); "
                     f"no collision among {len(contents)}", expected=MIN_BITS, observed=narrow)


def _colliding(keys: Sequence[int | None], contents: Sequence[Content],
               seen: dict[int, Content]) -> int:
    """How many of ``contents`` share a key with a different content met before."""
    count = 0
    for key, content in zip(keys, contents, strict=True):
        if key is not None and seen.setdefault(key, content) != content:
            count += 1
    return count


def measures(target: Target) -> tuple[Measure, Measure]:
    """The size of a weak key, for the ratchet: the contents of the whole search (every group,
    and the birthday escalation when the keys are narrow) whose key a different content has
    (higher is worse), and the spread of the distinct first blocks' keys in bits (lower is
    worse). Deterministic (``SEED``)."""
    keys_of = KeySource(target)
    rng = random.Random(SEED)
    seen: dict[int, Content] = {}
    colliding = searched = 0
    bits = MIN_BITS
    for where, contents in _searched(rng):
        keys = keys_of(contents)
        colliding += _colliding(keys, contents, seen)
        searched += len(contents)
        if where == "distinct first blocks":
            bits = spread_bits(keys)
    if bits < MIN_BITS:
        count = min(BIRTHDAY_CAP, 1 << (bits // 2 + 4))
        contents = list(dict.fromkeys((None, _random_block(rng)) for _ in range(count)))
        colliding += _colliding(keys_of(contents), contents, seen)
        searched += len(contents)
    return (Measure(COLLIDING_CONTENTS, colliding),
            Measure(KEY_SPREAD_BITS, bits, LOWER_IS_WORSE))


def finding_program(found: Collision, caps: Capabilities) -> tuple[Config, list[Op]]:
    """The pool and the two allocations that show ``found``: under the oracle the second
    must not share the first's key (HASH), nor its id (CONTENT, CACHE)."""
    program: list[Op] = []
    for prev, tokens in (found.first, found.second):
        if prev is None:
            program.append(ops.AllocateImmutable(None, tokens))
        else:
            program.append(ops.AllocateImmutableChain(None, (prev, tokens)))
    blocks = sum(1 if prev is None else 2 for prev, _ in (found.first, found.second))
    return Config(BLOCK_SIZE, blocks, 0, caps), program


def check(target: Target) -> None:
    """Raise the HASH finding (see the module doc), or return when the keys pass. A raised
    violation carries ``prefixcache_history`` (its program, for expected-failure matching)
    and ``prefixcache_program`` (config and program, to replay it), and its :func:`measures`."""
    found = search(target)
    if found is None:
        return
    size = measures(target)
    if isinstance(found, Violation):
        raise found.measured(*size)
    config, program = finding_program(found, target.caps)
    try:
        run_program(target, config, program)
    except Violation as violation:
        violation.measured(*size)
        violation.prefixcache_history = program  # type: ignore[attr-defined]
        violation.prefixcache_program = (config, program)  # type: ignore[attr-defined]
        raise
    raise Violation(Family.HASH, f"{found.where}: {found.first} and {found.second} share block "
                    f"key {found.key} in a large pool, yet the two-block program passes",
                    observed=found.key, measure=size)
