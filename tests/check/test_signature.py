"""Deviation signatures: numbers do not split a deviation, anything else does, and the regex a
written entry matches with covers exactly the messages of its template."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from models.core.invariants import Violation
from models.families.v0.invariants import Family
from models.families.v0.operations import Append, Free
from properties.core.signature import Signature, message_regex, signature, template


def test_numbers_lists_and_addresses_are_placeholders() -> None:
    assert template("block 2: id 7 is not a cpu id") == "block #: id # is not a cpu id"
    assert template("tokens (1, 2, 3) and (4,)") == template("tokens (9,) and (-5, 6)")
    assert template("<Block object at 0x7f3a2b>") == template("<Block object at 0xdeadbeef>")
    assert template("hash -6397743028309051838") == template("hash 12")
    assert template("evict returned block 1") != template("evict returned table 1")


WORDS = st.sampled_from(["block", "id", "hash", ":", "(", ")", "[", "]", ",", "+", ".", "x"])
NUMBERS = st.integers(-(2**64), 2**64).map(str)
PARTS = st.lists(st.one_of(WORDS, NUMBERS, st.just(", ")), max_size=8).map(" ".join)


@given(PARTS, PARTS)
def test_regex_matches_exactly_the_same_template(a: str, b: str) -> None:
    assert re.search(message_regex(a), a)
    assert bool(re.search(message_regex(a), b)) == (template(a) == template(b))


def test_signature_keys_on_family_type_and_operation() -> None:
    at_append = Violation(Family.CRASH, "append raised 3").at(Append(0, (1,)), 4)
    at_free = Violation(Family.CRASH, "append raised 3").at(Free(0), 4)
    again = Violation(Family.CRASH, "append raised 99").at(Append(2, (5, 6)), 17)
    sig = signature(at_append, "prefix_caching")
    assert sig == signature(again, "prefix_caching")
    assert sig != signature(at_free, "prefix_caching")
    assert sig != signature(at_append, "naive")
    assert sig != signature(Violation(Family.RC, "append raised 3").at(Append(0, (1,)), 4),
                            "prefix_caching")
    assert Signature.from_key(sig.key()) == sig
    assert signature(Violation(Family.LEAK, "initial state"), "naive").op == "-"
