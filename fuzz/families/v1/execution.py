"""One v1 fuzz input, end to end, for a :class:`~properties.families.v1.targets.PoolTarget`
(e.g. a patched zoo pool): the core's :func:`fuzz.core.execution.execute` at the ``pool``
level (decoder :mod:`fuzz.families.v1.decoder`, runner and oracle the v1 family's).

Every step is judged by :class:`~properties.families.v1.executor.Executor` (model, key
contract, event replay, misuse probes); its first :class:`~models.core.invariants.Violation`
ends the input and is the verdict. Contract: :func:`execute` never raises for anything the
target does; exceptions that escape are bugs of the suite.
"""

from __future__ import annotations

from fuzz.core.execution import Execution
from fuzz.core.execution import execute as core_execute
from fuzz.families.v1.decoder import MAX_OPS, Level
from properties.families.v1.family import FAMILY
from properties.families.v1.targets import PoolTarget

__all__ = ["Execution", "execute"]


def execute(data: bytes, target: PoolTarget, *, max_ops: int = MAX_OPS) -> Execution:
    """Decode ``data`` against ``target`` and judge every step."""
    return core_execute(data, FAMILY.target_of(target), Level.POOL, max_ops=max_ops)
