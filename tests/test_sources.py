"""``properties.core.sources``: reading upstream modules from a tree or a wheel, patches, and
the plan's synthetic packages (what both families' loaders share)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from properties.core.sources import (
    Entry,
    SourceFile,
    UpstreamSourceInvalid,
    apply_patches,
    extract_member,
    read_modules,
    with_packages,
)

MODULES = {"core.a": True, "core.b": False}


def _tree(root: Path) -> Path:
    (root / "pkg" / "core").mkdir(parents=True)
    (root / "pkg" / "core" / "a.py").write_text("X = 1\n", encoding="utf-8")
    (root / "pkg-1.2.dist-info").mkdir()
    (root / "pkg-1.2.dist-info" / "METADATA").write_text("Name: pkg\nVersion: 1.2\n",
                                                         encoding="utf-8")
    return root


def test_tree_and_wheel_read_the_same_modules(tmp_path: Path) -> None:
    tree = _tree(tmp_path / "t")
    read = read_modules(tree, "pkg", MODULES)
    assert read.version == "pkg 1.2" and set(read.files) == {"core.a"}
    assert read.files["core.a"].text == "X = 1\n"
    wheel = tmp_path / "pkg-1.2-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.write(tree / "pkg" / "core" / "a.py", "pkg/core/a.py")
        archive.write(tree / "pkg-1.2.dist-info" / "METADATA", "pkg-1.2.dist-info/METADATA")
    from_wheel = read_modules(wheel, "pkg", MODULES)
    assert from_wheel.version == read.version and from_wheel.files.keys() == read.files.keys()
    assert from_wheel.files["core.a"].text == read.files["core.a"].text


def test_missing_required_modules_and_bad_paths_are_invalid(tmp_path: Path) -> None:
    tree = _tree(tmp_path / "t")
    with pytest.raises(UpstreamSourceInvalid, match=r"pkg\.core\.c"):
        read_modules(tree, "pkg", {**MODULES, "core.c": True})
    (tmp_path / "f.txt").write_text("x", encoding="utf-8")
    with pytest.raises(UpstreamSourceInvalid, match="neither"):
        read_modules(tmp_path / "f.txt", "pkg", MODULES)


def test_patches_apply_exactly_once() -> None:
    files = {"m": SourceFile("a = 1\nb = 1\n", "m.py")}
    out = apply_patches(files, [("m", "a = 1", "a = 2")], "pkg")
    assert out["m"].text == "a = 2\nb = 1\n" and files["m"].text == "a = 1\nb = 1\n"
    with pytest.raises(UpstreamSourceInvalid, match="occurs 2 times"):
        apply_patches(files, [("m", "= 1", "= 2")], "pkg")
    with pytest.raises(UpstreamSourceInvalid, match="no such module"):
        apply_patches(files, [("n", "x", "y")], "pkg")


def test_with_packages_adds_every_parent() -> None:
    entries = with_packages({"a.b.c": Entry(False, file=SourceFile("", "c.py"))})
    assert {n for n, e in entries.items() if e.package} == {"a", "a.b"}


def test_extract_member_writes_once_and_replaces_a_different_size(tmp_path: Path) -> None:
    wheel = tmp_path / "w.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("pkg/_core.so", b"binary")
    root = tmp_path / "ext"
    with zipfile.ZipFile(wheel) as archive:
        path = extract_member(archive, "pkg/_core.so", root)
        assert path == root / "pkg" / "_core.so" and path.read_bytes() == b"binary"
        path.write_bytes(b"BINARY")  # same size: kept as it is
        extract_member(archive, "pkg/_core.so", root)
        assert path.read_bytes() == b"BINARY"
        path.write_bytes(b"torn")  # another size (a half-written file): written again
        extract_member(archive, "pkg/_core.so", root)
        assert path.read_bytes() == b"binary"
    assert sorted(p.name for p in path.parent.iterdir()) == ["_core.so"]  # no temporary left
