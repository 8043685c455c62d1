"""The v1 loader's import-closure resolver on small fake sources (no wheel needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from properties.families.v1.closure import ClosureError, Edge, Policy, Source, imports_of, resolve


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def _noop(_module: object) -> None:
    return None


def test_imports_skip_type_checking_and_mark_optional_and_lazy() -> None:
    text = """
from __future__ import annotations
import os
from typing import TYPE_CHECKING
from vllm.a import b, c
from . import sibling
from ..up import thing
if TYPE_CHECKING:
    from vllm.heavy import Never
else:
    import vllm.other
try:
    import optional_dep
except ImportError:
    optional_dep = None
def f():
    from vllm.lazy import x
class K:
    import vllm.in_class
"""
    edges = imports_of(text, "vllm.pkg.mod", is_package=False)
    assert Edge("os") in edges
    assert Edge("vllm.a", ("b", "c")) in edges
    assert Edge("vllm.pkg", ("sibling",)) in edges
    assert Edge("vllm.up", ("thing",)) in edges
    assert Edge("vllm.other") in edges
    assert Edge("optional_dep", (), optional=True) in edges
    assert Edge("vllm.lazy", ("x",), lazy=True) in edges
    assert Edge("vllm.in_class") in edges
    assert not any(e.target == "vllm.heavy" for e in edges)
    assert not any(e.target == "__future__" for e in edges)


def test_real_where_it_loads_stand_in_by_policy_and_as_fallback(tmp_path: Path) -> None:
    src = _tree(tmp_path, {
        "vllm/__init__.py": "import not_installed_engine_dep_xyz\n",
        "vllm/core/root.py": "from vllm.core.helper import h\nfrom vllm import envs\n"
                             "from vllm.mono import cdiv\n",
        "vllm/core/helper.py": "import json\nh = 1\n",
        "vllm/envs.py": "import not_installed_engine_dep_xyz\n",
        "vllm/mono/__init__.py": "import not_installed_engine_dep_xyz\n",
    })
    policy = Policy(stubs={"vllm.envs": _noop}, fallbacks={"vllm.mono": _noop})
    closure = resolve(Source(src, "vllm"), ["vllm.core.root"], policy)
    assert set(closure.real) == {"vllm.core.root", "vllm.core.helper"}
    assert set(closure.stubs) == {"vllm.envs", "vllm.mono"}
    assert "json" in closure.third_party
    assert "not_installed_engine_dep_xyz" in closure.reasons["vllm.mono"]
    assert closure.chains["vllm.mono"] == ("vllm.core.root", "vllm.mono")


def test_error_names_the_missing_module_and_the_import_chain(tmp_path: Path) -> None:
    src = _tree(tmp_path, {
        "vllm/core/root.py": "from vllm.core.mid import m\n",
        "vllm/core/mid.py": "import not_installed_engine_dep_xyz\nm = 1\n",
    })
    with pytest.raises(ClosureError) as info:
        resolve(Source(src, "vllm"), ["vllm.core.root"], Policy(stubs={}))
    err = info.value
    assert err.missing == "not_installed_engine_dep_xyz"
    assert err.chain == ("vllm.core.root", "vllm.core.mid", "not_installed_engine_dep_xyz")
    assert "not installed" in str(err)
    assert "vllm.core.root -> vllm.core.mid -> not_installed_engine_dep_xyz" in str(err)


def test_a_module_absent_from_the_source_is_named(tmp_path: Path) -> None:
    src = _tree(tmp_path, {"vllm/core/root.py": "from vllm.v1.token_buffer import token_slice\n"})
    with pytest.raises(ClosureError, match=r"cannot load vllm\.v1\.token_buffer: missing from "
                       r"the source.*vllm\.core\.root -> vllm\.v1\.token_buffer"):
        resolve(Source(src, "vllm"), ["vllm.core.root"], Policy(stubs={}))


def test_forbidden_third_party_is_not_imported(tmp_path: Path) -> None:
    src = _tree(tmp_path, {"vllm/core/root.py": "import json\n"})
    with pytest.raises(ClosureError, match="json is forbidden"):
        resolve(Source(src, "vllm"), ["vllm.core.root"],
                Policy(stubs={}, forbidden=frozenset({"json"})))


def test_optional_imports_may_be_missing(tmp_path: Path) -> None:
    src = _tree(tmp_path, {"vllm/core/root.py": "try:\n    import not_installed_xyz\n"
                                                "except ImportError:\n    pass\n"})
    closure = resolve(Source(src, "vllm"), ["vllm.core.root"], Policy(stubs={}))
    assert set(closure.real) == {"vllm.core.root"}


def test_lazy_imports_of_stand_ins_are_planned(tmp_path: Path) -> None:
    src = _tree(tmp_path, {"vllm/core/root.py": "def f():\n    from vllm.config import c\n"
                                                "def g():\n    import not_followed_xyz\n"})
    closure = resolve(Source(src, "vllm"), ["vllm.core.root"], Policy(stubs={"vllm.config": _noop}))
    assert set(closure.stubs) == {"vllm.config"}


@pytest.mark.parametrize(("layout", "expected"), [
    ({"vllm/_version.py": "__version__ = version = '9.8.7'\n"}, "vllm 9.8.7"),
    ({"vllm/_version.py": "__version__ = version = '9.8.7'\n",
      "vllm-1.2.3.dist-info/METADATA": "Name: vllm\nVersion: 1.2.3\n"}, "vllm 1.2.3"),
    ({}, "vllm unknown"),
])
def test_version_of_a_tree(tmp_path: Path, layout: dict[str, str], expected: str) -> None:
    src = _tree(tmp_path, {"vllm/core/root.py": "", **layout})
    assert Source(src, "vllm").version == expected
    assert Source(src / "vllm", "vllm").version == expected
