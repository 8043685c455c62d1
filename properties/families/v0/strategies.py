"""Hypothesis strategies that reach the hard states: tiny pools, block sizes 1..16, token
alphabets small enough that prefixes are shared and content collides."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

from hypothesis import strategies as st

from models.families.v0.capabilities import Capabilities, Config
from models.families.v0.operations import Extra, ExtraKey

BLOCK_SIZES = (1, 2, 3, 4, 8, 16)


def configs_of(target_caps: Callable[[], Capabilities]) -> st.SearchStrategy[Config]:
    """Small pools (forcing eviction and NoFreeBlocksError), with and without a CPU pool, for
    the capabilities ``target_caps()`` returns when the config is built: those of the target
    selected when the example starts (a target that does not swap gets no CPU pool).

    Not ``st.deferred(lambda: ...(current_target().caps))``: that built the strategy once per
    process and kept it, so a machine class run against a second target went on drawing the
    first one's capabilities (the model judged the second target by the first one's claims
    and rejected its examples; seeded runs depended on what ran before them). The pool-size
    strategy is still built once, so the choices a seed draws are unchanged."""
    def config(block_size: int, num_gpu_blocks: int, num_cpu_blocks: int) -> Config:
        caps = target_caps()
        return Config(block_size, num_gpu_blocks, num_cpu_blocks if caps.swap else 0, caps)

    return st.deferred(lambda: st.builds(
        config,
        block_size=st.sampled_from(BLOCK_SIZES),
        num_gpu_blocks=st.integers(1, 10),
        num_cpu_blocks=st.one_of(st.just(0), st.integers(1, 6)),
    ))


_WILD = (-1, -2, 2**61 - 1, 2**61, 2**63 - 1, 50_000,
         2**64 + 1, -(2**63) - 1)  # beyond int64: every accepted int must work


def _token(i: int) -> int:
    return i & 3 if i < 28 else _WILD[i - 28]


#: Token pairs a weak key confuses: Python's ``hash`` folds ints modulo 2**61 - 1 and maps -1 to
#: -2, so ``hash(x) == hash(twin)`` for each pair (and tuples of equal hashes hash equally).
_TWINS = {-1: -2, 0: 2**61 - 1, 1: 2**61, 3: 2**63 - 1}
_TWINS.update({v: k for k, v in list(_TWINS.items())})


def twin(block: tuple[int, ...]) -> tuple[int, ...]:
    """Different content that collides with ``block`` under Python's ``hash`` (every token
    that has a twin is swapped; a block of 2s only stays as it is)."""
    return tuple(_TWINS.get(t, t) for t in block)


@cache
def tokens(min_size: int, max_size: int) -> st.SearchStrategy[tuple[int, ...]]:
    """Token ids from a tiny alphabet, so equal blocks (cache hits) are common; occasionally
    extreme values that a weak encoding would confuse (negatives, -1 vs -2, 2**61-1 + k).
    One integer draw per token keeps generation cheap; values shrink towards 0.

    Built once per size range (the machines ask for it every step): a fresh strategy is
    validated and labelled again on its first draw, which cost more than the draw itself;
    a strategy is immutable, so the draws are the same."""
    return st.lists(st.integers(0, 27 + len(_WILD)).map(_token), min_size=min_size,
                    max_size=max_size).map(tuple)


#: A salt longer than 127 bytes (its length prefix takes two bytes).
_LONG_SALT = "salt-" * 26

#: Request keys in near-miss pairs: same LoRA with and without a salt, two salts, the same
#: salt with different multimodal inputs, an int hash against the same digits as a string.
#: Few enough that equal keys recur (and share); each pair must never share.
EXTRA_KEYS: tuple[ExtraKey, ...] = (
    ExtraKey(lora_id=1),
    ExtraKey(lora_id=2),
    ExtraKey(lora_id=1, cache_salt="a"),
    ExtraKey(lora_id=1, cache_salt="b"),
    ExtraKey(cache_salt="a"),
    ExtraKey(cache_salt="a", mm_hashes=(5,)),
    ExtraKey(cache_salt="a", mm_hashes=("5",)),
    ExtraKey(cache_salt=_LONG_SALT),
    ExtraKey(mm_hashes=(2**70, "img")),
    ExtraKey(mm_hashes=(-3,)),
    ExtraKey(lora_id=2, mm_hashes=(-3,)),
    # bytes (capability "bytes"): a salt is its bytes, so b"a" is the salt "a" (they share);
    # a salt that is no UTF-8 text; a multimodal hash as bytes, a near miss of 5 and "5"
    ExtraKey(cache_salt=b"a"),
    ExtraKey(lora_id=1, cache_salt=b"b"),
    ExtraKey(cache_salt=b"\xff\x00"),
    ExtraKey(cache_salt="a", mm_hashes=(b"5",)),
    ExtraKey(),  # the empty key is no key: it shares with plain requests
)


def target_keys(caps: Capabilities) -> list[ExtraKey]:
    """The :data:`EXTRA_KEYS` the target's extra-key function folds in (the empty key for
    every target with extra keys)."""
    return [k for k in EXTRA_KEYS if k.fields_used <= caps.extra_key_fields]


@cache
def extra_hashes(caps: Capabilities) -> st.SearchStrategy[Extra]:
    """What a request passes as ``extra_hash`` when the target takes one: nothing, a raw
    int, or request keys (:data:`EXTRA_KEYS` the target's extra-key function folds in; a salt
    in either spelling, :func:`same_keys`, so both meet on the same prompts). Built once per
    capabilities (as :func:`tokens`)."""
    if not caps.extra_keys:
        return st.none()
    raw = st.sampled_from((0, 1, 7, -1))
    keys = target_keys(caps)
    if not keys:
        return st.one_of(st.none(), st.none(), raw)
    return st.one_of(st.none(), st.none(), raw,
                     st.sampled_from(keys).flatmap(lambda key: same_keys(key, caps)))


def _spelling(extra: Extra) -> tuple[type, str]:
    """A cache key that tells every spelling of ``extra`` apart: ``ExtraKey`` equality is the
    request's identity (``"a"`` equals ``b"a"``, the empty key equals ``None``), but the
    strategies below differ by spelling and hand ``extra`` itself back."""
    return type(extra), repr(extra)


def _by_spelling(build: Callable[[Extra, Capabilities], st.SearchStrategy[Extra]]
                 ) -> Callable[[Extra, Capabilities], st.SearchStrategy[Extra]]:
    """``build`` memoized per spelling of ``extra`` and capabilities (as :func:`tokens`)."""
    built: dict[tuple[Any, ...], st.SearchStrategy[Extra]] = {}

    def cached(extra: Extra, caps: Capabilities) -> st.SearchStrategy[Extra]:
        key = (*_spelling(extra), caps)
        strategy = built.get(key)
        if strategy is None:
            strategy = built[key] = build(extra, caps)
        return strategy

    cached.__name__ = cached.__qualname__ = build.__name__
    cached.__doc__ = build.__doc__
    return cached


@_by_spelling
def near_misses(extra: Extra, caps: Capabilities) -> st.SearchStrategy[Extra]:
    """Request keys one field away from ``extra`` (no key: a key of one field), among those the
    target folds in: the same prompt under them must never hit ``extra``'s blocks."""
    base = extra if isinstance(extra, ExtraKey) else None
    lora, salt, mm = (base.lora_id, base.cache_salt, base.mm_hashes) if base else (None, None, ())
    fields = caps.extra_key_fields if caps.extra_keys else frozenset()
    salts: tuple[str | bytes | None, ...] = (None, "a", "b")
    hashes: tuple[tuple[int | str | bytes, ...], ...] = ((), (5,), ("5",))
    if "bytes" in fields:
        salts += (b"b", b"\xff\x00")
        hashes += ((b"5",),)
    candidates: list[ExtraKey] = []
    if "lora" in fields:
        candidates += [ExtraKey(v, salt, mm) for v in (None, 1, 2)]
    if "salt" in fields:
        candidates += [ExtraKey(lora, v, mm) for v in salts]
    if "mm" in fields:
        candidates += [ExtraKey(lora, salt, v) for v in hashes]
    unkeyed = base if base is not None else ExtraKey()
    options = [k for k in candidates if k != unkeyed and k != ExtraKey()]
    twins = [ExtraKey(lora, salt, (*mm[:i], other, *mm[i + 1:]))
             for i, item in enumerate(mm) if "mm" in fields
             for other in _spellings(item, "bytes" in fields)]
    if twins:  # the same hash as another type: a different input, the likeliest confusion
        return st.one_of(st.sampled_from(twins), st.sampled_from(options))
    return st.sampled_from(options) if options else st.just(extra)


def _spellings(item: int | str | bytes, with_bytes: bool) -> list[int | str | bytes]:
    """``item`` written as the other types of multimodal hash (``5``, ``"5"``, ``b"5"``)."""
    text = item.decode("utf-8", "replace") if isinstance(item, bytes) else str(item)
    out: list[int | str | bytes] = [text]
    if with_bytes:
        out.append(text.encode("utf-8"))
    if text.lstrip("-").isdigit():
        out.append(int(text))
    return [o for o in out if type(o) is not type(item)]


def respelled(extra: Extra, caps: Capabilities) -> ExtraKey | None:
    """The same request key with its salt spelled the other way (a ``str`` salt as its UTF-8
    bytes, a bytes salt that is UTF-8 text as a ``str``), for targets that take bytes; None
    when there is no other spelling. A request under it must hit ``extra``'s blocks."""
    if not (isinstance(extra, ExtraKey) and caps.extra_keys
            and "bytes" in caps.extra_key_fields):
        return None
    salt = extra.cache_salt
    if isinstance(salt, str):
        return ExtraKey(extra.lora_id, salt.encode("utf-8"), extra.mm_hashes)
    if isinstance(salt, bytes):
        try:
            return ExtraKey(extra.lora_id, salt.decode("utf-8"), extra.mm_hashes)
        except UnicodeDecodeError:
            return None
    return None


@_by_spelling
def same_keys(extra: Extra, caps: Capabilities) -> st.SearchStrategy[Extra]:
    """``extra``, or the same request key :func:`respelled` (``ExtraKey`` equality is
    identity, so both must share blocks)."""
    other = respelled(extra, caps)
    return st.just(extra) if other is None else st.sampled_from((extra, other))


#: The block machine's read-only questions, each with the API generation it needs (None: all).
QUERIES: tuple[tuple[str, str | None], ...] = (
    ("hit_rate", None),
    ("computed_block_ids", "aphrodite_api"),
    ("cached_prefix", "vllm_api"),
    ("count_touched", "aphrodite_api"),
    ("count_full_touched", "vllm_api"),
)


@cache
def pressure() -> st.SearchStrategy[int]:
    """How many free ids a drain leaves: none (the next allocation must evict or fail), or a
    few."""
    return st.sampled_from((0, 0, 1, 2))


# --------------------------------------------------------------------------- int-like tokens
# Engines pass token ids straight from numpy arrays. A conforming allocator treats an int
# subclass token exactly as the plain int it equals (docs/API.md hashes with Python ``hash()``,
# which does): same content hash, same cache hit, same KV content.


class TokenId(int):
    """A token id of an ``int`` subclass (a stand-in for numpy's ints, no dependency)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"TokenId({int(self)})"


def int_like(token_ids: list[int]) -> list[int]:
    """``token_ids`` as :class:`TokenId` instances (the plans of ``HashRecompute`` and
    ``AllocateImmutableIntLike`` call it, so reproducers show it)."""
    return [TokenId(t) for t in token_ids]


def int_like_hash(value: int | None) -> int | None:
    """A predecessor's hash as an instance of the same ``int`` subclass (``HashRecompute``'s
    plan passes it with int-like tokens: a key must not depend on the int's class); ``None``
    stays ``None``."""
    return None if value is None else TokenId(value)

# --------------------------------------------------------------------------- end int-like tokens
