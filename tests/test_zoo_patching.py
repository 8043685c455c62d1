"""The zoo's patch mechanism (``tests.zoo.patching``): every mutant's patches apply exactly
once to the reference as it is now, a patch that no longer applies fails loudly, and a copy
leaves the bundled package alone."""

from __future__ import annotations

import pytest

import prefixcache
from prefixcache import errors, prefix_caching_block
from tests.zoo import patching
from tests.zoo.patching import Patch, PatchError, apply
from tests.zoo.v0 import argument_mutants, broken

_SOURCE = (patching._SOURCE / "prefix_caching_block.py").read_text()
_COW = "PrefixCachingBlockAllocator.cow_block_if_not_appendable"


def test_every_mutant_applies_and_marks_its_bug() -> None:
    patching.precompile()  # raises PatchError for any patch that does not apply
    for patches in [*(m.patches for m in broken.ZOO.values()),
                    *argument_mutants.PATCHES.values()]:
        assert any("BUG" in p.replace for p in patches)


@pytest.mark.parametrize(("patch", "message"), [
    (Patch("prefix_caching_block", _COW, "record_cow(dst, src)", "x"), "occurs 0 times"),
    (Patch("prefix_caching_block", "", "del self._cow_tracker", "x"), "occurs 0 times"),
    (Patch("prefix_caching_block", "", "return block_id", "x"), r"occurs \d+ times"),
    (Patch("prefix_caching_block", "PrefixCachingBlockAllocator.no_such_method", "x", "y"),
     "has no 'PrefixCachingBlockAllocator.no_such_method'"),
    (Patch("prefix_caching_block", _COW, "return src", "return src"), "changes nothing"),
])
def test_a_patch_that_does_not_apply_fails_loudly(patch: Patch, message: str) -> None:
    with pytest.raises(PatchError, match=message) as raised:
        apply(_SOURCE, patch, "demo")
    assert "zoo mutant 'demo'" in str(raised.value)


def test_an_unknown_module_fails_when_the_copy_is_built() -> None:
    patching.register("demo_unknown_module", (Patch("no_such_module", "", "a", "b"),))
    with pytest.raises(PatchError, match="no_such_module"):
        patching.package("demo_unknown_module")


def test_later_lines_take_the_indentation_of_the_first() -> None:
    patched = apply(_SOURCE, Patch("prefix_caching_block", _COW,
                                   "dst = self._take_fresh_id()\nself._release(src, block)",
                                   "self._release(src, block)\ndst = self._take_fresh_id()"), "x")
    assert "        self._release(src, block)\n        dst = self._take_fresh_id()\n" in patched
    assert len(patched.splitlines()) == len(_SOURCE.splitlines())


def test_a_copy_changes_only_itself() -> None:
    copy = patching.package("cow_not_recorded")
    assert copy.PrefixCachingBlockAllocator is not prefixcache.PrefixCachingBlockAllocator
    assert copy.prefix_caching_block is not prefix_caching_block
    assert copy.errors is errors  # no patch reaches it: the bundled module itself
    bundled = prefixcache.CpuGpuBlockAllocator.create("prefix_caching", 2, 0, 1)
    mutant = broken.cow_not_recorded("prefix_caching", 2, 0, 1)  # type: ignore[attr-defined]
    for alloc in (bundled, mutant):
        gpu = alloc._allocators[prefixcache.Device.GPU]
        block = gpu.allocate_mutable_block(None)
        gpu.fork(block)
        block.append_token_ids([1])  # shared: copy-on-write
    assert bundled.clear_copy_on_writes() == [(0, 1)]
    assert mutant.clear_copy_on_writes() == []
