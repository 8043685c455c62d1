"""Hypothesis strategies that reach the hard states: tiny pools, block sizes 1..16, token
alphabets small enough that prefixes are shared and content collides."""

from __future__ import annotations

from hypothesis import strategies as st

from models.capabilities import Capabilities, Config

BLOCK_SIZES = (1, 2, 3, 4, 8, 16)


def configs(caps: Capabilities) -> st.SearchStrategy[Config]:
    """Small pools (forcing eviction and NoFreeBlocksError) with and without a CPU pool."""
    cpu = st.integers(1, 6) if caps.swap else st.just(0)
    return st.builds(
        Config,
        block_size=st.sampled_from(BLOCK_SIZES),
        num_gpu_blocks=st.integers(1, 10),
        num_cpu_blocks=st.one_of(st.just(0), cpu) if caps.swap else st.just(0),
        caps=st.just(caps),
    )


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


def tokens(min_size: int, max_size: int) -> st.SearchStrategy[tuple[int, ...]]:
    """Token ids from a tiny alphabet, so equal blocks (cache hits) are common; occasionally
    extreme values that a weak encoding would confuse (negatives, -1 vs -2, 2**61-1 + k).
    One integer draw per token keeps generation cheap; values shrink towards 0."""
    return st.lists(st.integers(0, 27 + len(_WILD)).map(_token), min_size=min_size,
                    max_size=max_size).map(tuple)


def extra_hashes(caps: Capabilities) -> st.SearchStrategy[int | None]:
    """Extra keys (LoRA id, cache salt, multimodal hash) when the target takes them."""
    if not caps.extra_keys:
        return st.none()
    return st.one_of(st.none(), st.none(), st.sampled_from((0, 1, 7, -1)))


#: The block machine's read-only questions, each with the API generation it needs (None: all).
QUERIES: tuple[tuple[str, str | None], ...] = (
    ("hit_rate", None),
    ("computed_block_ids", "aphrodite_api"),
    ("cached_prefix", "vllm_api"),
    ("count_touched", "aphrodite_api"),
    ("count_full_touched", "vllm_api"),
)


def pressure() -> st.SearchStrategy[int]:
    """How many free ids a drain leaves: none (the next allocation must evict or fail), or a
    few."""
    return st.sampled_from((0, 0, 1, 2))
