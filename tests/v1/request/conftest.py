"""Request-level tests need torch (the spec classes' dtypes) and the vllm 0.34.0 (the default
release) and 0.33.0 (the zoo's and the bundled pool's reference) wheels."""

from __future__ import annotations

import pytest

from properties.families.v1 import upstream
from properties.families.v1.request.loader import TORCH_REQUIREMENT, torch_available

_MISSING = [v for v in (upstream.DEFAULT_VERSION, "0.33.0") if upstream.cached_wheel(v) is None
            and upstream.source_from_env(v) is None]
SKIP_REASON = (
    f"the v1 request level needs torch (pip install '{TORCH_REQUIREMENT}', extra v1-manager)"
    if not torch_available() else
    f"no vllm {_MISSING[0]} wheel cached (`{upstream.FETCH_COMMAND} --version {_MISSING[0]}`)"
    if _MISSING else "")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not SKIP_REASON:
        return
    for item in items:
        if "tests/v1/request" in str(item.path).replace("\\", "/"):
            item.add_marker(pytest.mark.skip(reason=SKIP_REASON))
