"""pytest plugin of the v1 family (entry point ``prefixcache_v1``): the core's options reach v1.

The target and the expected failures are the core's (:mod:`properties.core.plugin`):
``--allocator SPEC`` names a v1 pool (a ``BlockPool`` class or a function returning a
:class:`~properties.families.v1.targets.PoolTarget`; detected, or ``--family v1``), and
``--xfails-file FILE`` its known deviations, in the core's format (see
:mod:`properties.families.v1.xfails`). ``--pool SPEC`` and ``--pool-xfails-file FILE`` are kept
as aliases of the two (with ``--family v1``).

Which tests run: with a family chosen (``--allocator``, ``--family``, ``--pool`` or
``$PREFIXCACHE_ALLOCATOR``), only that family's tests under ``properties/`` (the v1 ones are
this folder's; the request level, ``request/``, is a family of its own, ``v1-manager``, which
this plugin leaves to the core). With none, both families run on their bundled references
(v1: ``$PREFIXCACHE_POOL``, else the bundled pool); an xfails file then belongs to the default
family, so the v1 replays are left out.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from properties.core import plugin, selection
from properties.core.plugin import ExpectedFailure
from properties.core.targets import TargetError
from properties.families.v1 import targets, upstream
from properties.families.v1.family import FAMILY, pool_of
from properties.families.v1.xfails import applies

V1_DIR = Path(__file__).resolve().parent
REQUEST_DIR = V1_DIR / "request"
PROPERTIES_DIR = V1_DIR.parents[1]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("prefixcache-v1", "vLLM v1 BlockPool conformance")
    group.addoption("--pool", default=None,
                    help="alias of --allocator SPEC --family v1 (a v1 pool spec)")
    group.addoption("--pool-xfails-file", default=None,
                    help="alias of --xfails-file for a v1 pool")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Fold the aliases into the core's options before the core selects the target."""
    pool = config.getoption("pool")
    if pool:
        allocator = config.getoption("allocator")
        if allocator and allocator != pool:
            raise pytest.UsageError("--pool is an alias of --allocator for the v1 family: "
                                    "give one of them")
        config.option.allocator = pool
        if config.getoption("family") not in (None, FAMILY.name):
            raise pytest.UsageError(f"--pool names a v1 pool, not a "
                                    f"{config.getoption('family')} target")
        config.option.family = FAMILY.name
    pool_xfails = config.getoption("pool_xfails_file")
    if pool_xfails:
        xfails = config.getoption("xfails_file")
        if xfails and xfails != pool_xfails:
            raise pytest.UsageError("--pool-xfails-file is an alias of --xfails-file: "
                                    "give one of them")
        config.option.xfails_file = pool_xfails


def _chosen(config: pytest.Config) -> bool:
    """Whether the session names its target (so its family alone runs)."""
    return bool(config.getoption("allocator") or config.getoption("family")
                or os.environ.get("PREFIXCACHE_ALLOCATOR"))


def v1_selected() -> bool:
    return selection.family_name() == FAMILY.name


def _under(item: pytest.Item, directory: Path) -> bool:
    try:
        Path(str(item.path)).resolve().relative_to(directory)
    except ValueError:
        return False
    return True


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    chosen, v1 = _chosen(config), v1_selected()
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        # The request level (request/) is another family's: under a v1 run it is "other".
        is_v1 = _under(item, V1_DIR) and not _under(item, REQUEST_DIR)
        is_other = not is_v1 and _under(item, PROPERTIES_DIR)
        if chosen and v1:
            unwanted = is_other
        elif chosen:
            unwanted = is_v1
        else:
            unwanted = is_v1 and item.name.startswith("test_expected_failure")
        (drop if unwanted else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture(scope="session")
def pool_target(pytestconfig: pytest.Config) -> targets.PoolTarget:
    """The selected v1 target (``--allocator``), or with no v1 target chosen the v1 default:
    ``$PREFIXCACHE_POOL``, else the bundled pool."""
    if v1_selected():
        try:
            return pool_of(selection.current_target())
        except (TargetError, ImportError) as exc:
            raise pytest.UsageError(f"--allocator: {exc}") from None
    spec = os.environ.get(targets.ENV_VAR) or targets.default_spec()
    if spec == targets.UPSTREAM_SPEC and upstream.cached_wheel() is None:
        pytest.skip(f"the bundled v1 pool is not importable and no vllm wheel is cached "
                    f"(`{upstream.FETCH_COMMAND}`)")
    try:
        return targets.load(spec)
    except (TargetError, ImportError) as exc:
        raise pytest.UsageError(f"${targets.ENV_VAR} {spec}: {exc}") from None


@pytest.fixture(scope="session")
def pool_raw_xfails(pytestconfig: pytest.Config, pool_target: targets.PoolTarget
                    ) -> list[dict[str, Any]]:
    """The xfails file's entries as written, those for this target's version (a v1 run only)."""
    if not v1_selected():
        return []
    raw = plugin.load_raw(pytestconfig.getoption("xfails_file"))
    return [e for e in raw if applies(e, pool_target.version)]


@pytest.fixture(scope="session")
def pool_xfails(pytestconfig: pytest.Config, pool_raw_xfails: list[dict[str, Any]]
                ) -> list[ExpectedFailure]:
    """The core's entries for this target's version (a v1 run only)."""
    ids = {e["id"] for e in pool_raw_xfails}
    return [e for e in plugin.expected_entries(pytestconfig) if e.id in ids]
