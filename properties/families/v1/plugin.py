"""pytest plugin of the v1 family (entry point ``prefixcache_v1``).

Options: ``--pool SPEC`` picks the v1 target (default ``$PREFIXCACHE_POOL``, else the bundled
``prefixcache.v1.core.block_pool:BlockPool`` when importable, else vLLM 0.33.0's pool);
``--pool-xfails-file FILE`` lists the target's known deviations (``conformance/*.xfails.json``
format: ``id``, ``family``, ``class``, ``explanation``, ``versions``, ``config``, ``program``,
``match``). Family selection: with ``--allocator`` and no ``--pool`` the v1 tests are
deselected; with ``--pool`` and no ``--allocator`` the v0 tests under ``properties/`` are;
with neither (or both) both families run.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from properties.core.targets import TargetError
from properties.families.v1 import targets, upstream
from properties.families.v1.machine import FINDINGS

V1_DIR = Path(__file__).resolve().parent
PROPERTIES_DIR = V1_DIR.parents[1]
CONFORMANCE_DIR = PROPERTIES_DIR.parent / "conformance"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("prefixcache-v1", "vLLM v1 BlockPool conformance")
    group.addoption("--pool", default=None, help="v1 pool spec module:callable "
                    f"(default ${targets.ENV_VAR} or {targets.DEFAULT_SPEC} if importable, "
                    f"else {targets.UPSTREAM_SPEC})")
    group.addoption("--pool-xfails-file", default=None,
                    help="JSON list of the v1 target's expected deviations")


def load_xfails(path: str | None) -> list[dict[str, Any]]:
    if not path:
        return []
    entries: list[dict[str, Any]] = json.loads(Path(path).read_text(encoding="utf-8"))
    for e in entries:
        missing = {"id", "family", "class", "explanation", "program", "match"} - set(e)
        if missing:
            raise pytest.UsageError(f"{path}: entry {e.get('id')!r} lacks {sorted(missing)}")
    return entries


def _under(item: pytest.Item, directory: Path) -> bool:
    try:
        Path(str(item.path)).resolve().relative_to(directory)
    except ValueError:
        return False
    return True


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    v0 = config.getoption("allocator") is not None
    v1 = config.getoption("pool") is not None
    if v0 == v1:
        return
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        is_v1 = _under(item, V1_DIR)
        is_v0 = not is_v1 and _under(item, PROPERTIES_DIR)
        (drop if (v0 and is_v1) or (v1 and is_v0) else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def _chosen_spec(config: pytest.Config) -> str | None:
    return config.getoption("pool") or os.environ.get(targets.ENV_VAR) or None


@pytest.fixture(scope="session")
def pool_target(pytestconfig: pytest.Config) -> targets.PoolTarget:
    spec = _chosen_spec(pytestconfig)
    if spec is None:
        spec = targets.default_spec()
        if spec == targets.UPSTREAM_SPEC and upstream.cached_wheel() is None:
            pytest.skip(f"the bundled v1 pool is not importable and no vllm wheel is cached "
                        f"(`{upstream.FETCH_COMMAND}`)")
    try:
        return targets.load(spec)
    except (TargetError, ImportError) as exc:
        raise pytest.UsageError(f"--pool {spec}: {exc}") from None


@pytest.fixture(scope="session")
def pool_xfails(pytestconfig: pytest.Config, pool_target: targets.PoolTarget
                ) -> list[dict[str, Any]]:
    """The xfails file's entries for this target's version. Without the option, a run that
    fell back to upstream vLLM (no ``--pool``, bundled pool absent) uses the repository's
    ``conformance/vllm-<minor>.xfails.json``."""
    path = pytestconfig.getoption("pool_xfails_file")
    if path is None and _chosen_spec(pytestconfig) is None and pool_target.name == "vllm":
        minor = ".".join(pool_target.version.split(".")[:2])
        candidate = CONFORMANCE_DIR / f"vllm-{minor}.xfails.json"
        path = str(candidate) if candidate.is_file() else None
    entries = load_xfails(path)
    return [e for e in entries if pool_target.version in e.get("versions", [pool_target.version])]


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if FINDINGS:
        terminalreporter.section("prefixcache v1 robustness findings (misuse probes)")
        for finding in FINDINGS.values():
            terminalreporter.write_line(str(finding))
