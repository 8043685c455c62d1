"""pytest plugin of the v1 request level (entry point ``prefixcache_v1_request``).

Options: ``--manager SPEC`` (``module:callable`` returning a
:class:`~properties.families.v1.request.target.ManagerTarget`; default the newest release's
manager) and
``--manager-xfails-file FILE`` (the block level's xfails format; ``config`` is a
:class:`~properties.families.v1.request.target.ManagerConfig` in JSON, ``config_name`` the machine
configuration it applies to). Without the option, a run on vLLM uses the repository's
``conformance/vllm-<minor>.manager.xfails.json``. The fixtures skip, with the reason, when
torch or the wheel is absent.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from properties.core.sources import UpstreamError
from properties.core.targets import TargetError, resolve
from properties.families.v1 import upstream
from properties.families.v1.request.loader import TORCH_REQUIREMENT, torch_available
from properties.families.v1.request.target import ManagerTarget

DEFAULT_SPEC = "properties.families.v1.request.target:vllm_v1_manager"
CONFORMANCE_DIR = Path(__file__).resolve().parents[4] / "conformance"
REQUIRED = {"id", "family", "class", "explanation", "config", "program", "match"}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("prefixcache-v1-request", "vLLM v1 KVCacheManager conformance")
    group.addoption("--manager", default=None,
                    help=f"v1 manager spec module:callable (default {DEFAULT_SPEC})")
    group.addoption("--manager-xfails-file", default=None,
                    help="JSON list of the manager's expected deviations")


def load_xfails(path: str | Path | None) -> list[dict[str, Any]]:
    if not path:
        return []
    entries: list[dict[str, Any]] = json.loads(Path(path).read_text(encoding="utf-8"))
    for e in entries:
        missing = REQUIRED - set(e)
        if missing:
            raise pytest.UsageError(f"{path}: entry {e.get('id')!r} lacks {sorted(missing)}")
    return entries


@pytest.fixture(scope="session")
def manager_target(pytestconfig: pytest.Config) -> ManagerTarget:
    spec = pytestconfig.getoption("manager") or DEFAULT_SPEC
    if not torch_available():
        pytest.skip(f"the v1 request level needs torch: pip install '{TORCH_REQUIREMENT}' "
                    "(extra v1-manager)")
    if (spec == DEFAULT_SPEC and upstream.cached_wheel() is None
            and not os.environ.get(upstream.SOURCE_ENV)):
        pytest.skip(f"no vllm {upstream.DEFAULT_VERSION} wheel cached "
                    f"(`{upstream.FETCH_COMMAND}`)")
    try:
        target = resolve(spec)()
    except (TargetError, UpstreamError, ImportError) as exc:
        raise pytest.UsageError(f"--manager {spec}: {exc}") from None
    if not isinstance(target, ManagerTarget):
        raise pytest.UsageError(f"--manager {spec}: returned {type(target).__name__}")
    return target


@pytest.fixture(scope="session")
def manager_xfails(pytestconfig: pytest.Config, manager_target: ManagerTarget
                   ) -> list[dict[str, Any]]:
    path = pytestconfig.getoption("manager_xfails_file")
    if path is None and manager_target.name == "vllm":
        minor = ".".join(manager_target.version.split(".")[:2])
        candidate = CONFORMANCE_DIR / f"vllm-{minor}.manager.xfails.json"
        path = str(candidate) if candidate.is_file() else None
    return [e for e in load_xfails(path)
            if manager_target.version in e.get("versions", [manager_target.version])]
