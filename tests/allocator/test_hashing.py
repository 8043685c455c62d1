"""Content hashing: canonical encoding, domain separation, process independence."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prefixcache import InvalidArgumentError, PrefixCachingBlock, hash_block_tokens, make_extra_hash
from prefixcache.hashing import DIGEST_SIZE, default_hash_function

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_value_is_a_non_negative_128_bit_int_and_deterministic() -> None:
    value = hash_block_tokens(True, None, [1, 2, 3])
    assert isinstance(value, int) and 0 <= value < 2 ** (8 * DIGEST_SIZE)
    assert value == hash_block_tokens(True, None, (1, 2, 3))
    assert default_hash_function is hash_block_tokens


@pytest.mark.parametrize(
    ("left", "right"),
    [
        ((True, None, [1, 2], None), (False, 0, [1, 2], None)),
        ((False, 1, [1, 2], None), (False, 2, [1, 2], None)),
        ((True, None, [1, 2], None), (True, None, [2, 1], None)),
        ((True, None, [1, 2], None), (True, None, [1, 2], 0)),
        ((True, None, [1, 2], 1), (True, None, [1, 2], 2)),
        ((True, None, [-1], None), (True, None, [-2], None)),
        ((True, None, [1], None), (True, None, [1 + (2**61 - 1)], None)),
        ((True, None, [2**63 - 1], None), (True, None, [2**63], None)),
        ((True, None, [2**64], None), (True, None, [0, 1], None)),
        ((True, None, [-(2**63)], None), (True, None, [-(2**63) - 1], None)),
        ((True, None, [], None), (True, None, [0], None)),
        ((False, -1, [5], None), (False, 2**128 - 1, [5], None)),
        ((False, 1, [], 2), (False, 1, [2], None)),
    ],
)
def test_distinct_inputs_give_distinct_hashes(
    left: tuple[bool, int | None, list[int], int | None],
    right: tuple[bool, int | None, list[int], int | None],
) -> None:
    assert hash_block_tokens(*left) != hash_block_tokens(*right)


def test_huge_and_negative_tokens_are_accepted() -> None:
    tokens = [-(10**40), 10**40, -1, 0, 2**200]
    assert hash_block_tokens(True, None, tokens) == hash_block_tokens(True, None, list(tokens))


@pytest.mark.parametrize(
    "args",
    [
        (True, 5, [1], None),
        (False, None, [1], None),
        (1, None, [1], None),
        (True, None, [1.5], None),
        (True, None, "12", None),
        (True, None, 12, None),
        (True, None, [1], "x"),
        (False, "5", [1], None),
    ],
)
def test_malformed_arguments_raise(args: tuple[object, ...]) -> None:
    with pytest.raises(InvalidArgumentError):
        hash_block_tokens(*args)  # type: ignore[arg-type]


_CHILD = (
    "from prefixcache import hash_block_tokens, make_extra_hash, PrefixCachingBlock\n"
    "h = hash_block_tokens(True, None, [1, 2, 3, -4, 2**70], make_extra_hash(lora_id=3))\n"
    "print(h, hash_block_tokens(False, h, [7, 8]), "
    "PrefixCachingBlock.hash_block_tokens(True, None, [9]))\n"
)


def test_hashes_are_identical_across_processes_and_hash_seeds() -> None:
    h = hash_block_tokens(True, None, [1, 2, 3, -4, 2**70], make_extra_hash(lora_id=3))
    expected = f"{h} {hash_block_tokens(False, h, [7, 8])} {hash_block_tokens(True, None, [9])}"
    outputs = set()
    for seed in ("0", "1", "12345", "random"):
        env = dict(os.environ, PYTHONHASHSEED=seed, PYTHONPATH=str(REPO_ROOT))
        result = subprocess.run(
            [sys.executable, "-c", _CHILD], capture_output=True, text=True, env=env, check=True
        )
        outputs.add(result.stdout.strip())
    assert outputs == {expected}


def test_make_extra_hash_separates_every_key() -> None:
    assert make_extra_hash() is None
    values = [
        make_extra_hash(lora_id=1),
        make_extra_hash(lora_id=2),
        make_extra_hash(cache_salt="1"),
        make_extra_hash(cache_salt="2"),
        make_extra_hash(mm_hashes=["1"]),
        make_extra_hash(mm_hashes=[1]),
        make_extra_hash(mm_hashes=[b"1"]),
        make_extra_hash(mm_hashes=["ab"]),
        make_extra_hash(mm_hashes=["a", "b"]),
        make_extra_hash(mm_hashes=["b", "a"]),
        make_extra_hash(lora_id=1, cache_salt="1"),
        make_extra_hash(lora_id=1, mm_hashes=["1"]),
        make_extra_hash(lora_id=0),
        make_extra_hash(cache_salt=""),
    ]
    assert all(isinstance(v, int) for v in values)
    assert len(set(values)) == len(values)
    assert make_extra_hash(cache_salt="é") == make_extra_hash(cache_salt="é".encode())
    assert make_extra_hash(lora_id=7) == make_extra_hash(lora_id=7)
    assert make_extra_hash(lora_id=1) != hash_block_tokens(False, 1, [])


@pytest.mark.parametrize(
    "kwargs",
    [
        {"lora_id": True},
        {"lora_id": "1"},
        {"cache_salt": 5},
        {"mm_hashes": "abc"},
        {"mm_hashes": [1.5]},
        {"mm_hashes": [True]},
        {"mm_hashes": 7},
        {"mm_hashes": iter(["a"])},
        {"mm_hashes": bytearray(b"ab")},
    ],
)
def test_make_extra_hash_rejects_bad_types(kwargs: dict[str, object]) -> None:
    with pytest.raises(InvalidArgumentError):
        make_extra_hash(**kwargs)  # type: ignore[arg-type]


def test_make_extra_hash_reads_no_mm_hashes_as_none() -> None:
    assert make_extra_hash(mm_hashes=None) is None
    assert make_extra_hash(lora_id=3, mm_hashes=None) == make_extra_hash(lora_id=3)


def test_block_class_hash_treats_both_sentinels_alike() -> None:
    tokens = [4, 5, 6]
    plain = hash_block_tokens(True, None, tokens, 9)
    assert PrefixCachingBlock.hash_block_tokens(True, None, tokens, 9) == plain
    assert (
        PrefixCachingBlock.hash_block_tokens(True, PrefixCachingBlock._none_hash, tokens, 9)
        == plain
    )
    assert PrefixCachingBlock._none_hash == hash("None")
    with pytest.raises(InvalidArgumentError):
        PrefixCachingBlock.hash_block_tokens(False, PrefixCachingBlock._none_hash, tokens)


_inputs = st.tuples(
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**130),
    st.lists(st.integers(min_value=-(2**70), max_value=2**70), max_size=6),
    st.none() | st.integers(min_value=-(2**70), max_value=2**70),
)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(left=_inputs, right=_inputs)
def test_hash_is_injective_on_random_inputs(
    left: tuple[bool, int, list[int], int | None], right: tuple[bool, int, list[int], int | None]
) -> None:
    def normalise(x: tuple[bool, int, list[int], int | None]) -> tuple[object, ...]:
        first, prev, tokens, extra = x
        return (first, None if first else prev, tuple(tokens), extra)

    a, b = normalise(left), normalise(right)
    hashes = [hash_block_tokens(*x) for x in (a, b)]  # type: ignore[arg-type]
    assert (hashes[0] == hashes[1]) == (a == b)


def _reference_key(is_first: bool, prev: int | None, tokens: list[int], extra: int | None) -> int:
    """The encoding the module docstring specifies, written out plainly (one byte at a time,
    no fast paths): values must never change with an optimisation of the hot path."""
    import hashlib

    def varint(n: int) -> bytes:
        out = bytearray()
        while True:
            out.append((n & 0x7F) | (0x80 if n >> 7 else 0))
            n >>= 7
            if not n:
                return bytes(out)

    def integer(n: int) -> bytes:
        size = (n.bit_length() + 8) // 8
        return varint(size) + n.to_bytes(size, "big", signed=True)

    data = b"\x00" if is_first else b"\x01" + integer(prev)  # type: ignore[arg-type]
    if all(-(2**63) <= t < 2**63 for t in tokens):
        data += b"\x01" + varint(len(tokens)) + b"".join(t.to_bytes(8, "little", signed=True)
                                                          for t in tokens)
    else:
        data += b"\x02" + varint(len(tokens)) + b"".join(integer(t) for t in tokens)
    data += b"\x00" if extra is None else b"\x01" + integer(extra)
    digest = hashlib.blake2b(data, digest_size=16, person=b"prefixcache.blk1").digest()
    return int.from_bytes(digest, "big")


_ints = st.one_of(st.integers(-(2**63), 2**63 - 1), st.integers(-(2**90), 2**90),
                  st.integers(0, 40_000))


@settings(max_examples=300, deadline=None)
@given(first=st.booleans(), prev=st.integers(-(2**130), 2**130),
       tokens=st.lists(_ints, max_size=200), extra=st.none() | _ints)
def test_the_value_is_the_specified_encoding(first: bool, prev: int, tokens: list[int],
                                             extra: int | None) -> None:
    previous = None if first else prev
    expected = _reference_key(first, previous, tokens, extra)
    assert hash_block_tokens(first, previous, tokens, extra) == expected
    assert hash_block_tokens(first, previous, tuple(tokens), extra) == expected
