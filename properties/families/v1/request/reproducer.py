"""Plain reproducer scripts: a request-level program as direct calls on vLLM's manager.

The program is replayed once with recording on (:attr:`RequestExecutor.trace`); the script
makes exactly the calls the executor made (building stand-in requests hashed by the release's
own hasher) and prints what a reader needs: each hit, each allocation, and at the end every
block's reference count and hash. :func:`script_body` is the family's part of the core's
reproducer (:meth:`ManagerFamily.script`); :func:`render` writes a whole script for
``conformance/`` (``conformance/render_v1_manager_reproducers.py``).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from models.core.invariants import Violation
from models.families.v1 import request_ops as ops
from properties.families.v1.request.executor import RequestExecutor
from properties.families.v1.request.target import ManagerConfig, ManagerTarget

# The target factory a script names for a release (others: the default release's).
RELEASE_FACTORIES = {"0.34.0": "vllm_v034_manager", "0.33.0": "vllm_v033_manager"}
TARGET_MODULE = "properties.families.v1.request.target"


def traced(target: ManagerTarget, config: ManagerConfig, program: Sequence[ops.ROp]
           ) -> tuple[list[str], str]:
    """The calls ``program`` makes on a fresh manager, as script lines (up to and including
    the failing step), and the verdict's first line."""
    ex = RequestExecutor(target, config)
    ex.trace = []
    verdict = "no violation"
    try:
        for op in program:
            ex.step(op)
    except Violation as v:
        verdict = str(v).splitlines()[0]
    return ex.trace, verdict


def script_body(target: ManagerTarget, config: ManagerConfig, program: Sequence[ops.ROp],
                module: str, factory: str, comment: str = "") -> list[str]:
    """Imports, ``target = factory()`` (imported from ``module``), the manager and hasher of
    ``config``, the program's calls, and the final reference counts and hashes."""
    c = config
    root = factory.split(".")[0]
    imports = ([f"from {TARGET_MODULE} import ManagerConfig, {root}"] if module == TARGET_MODULE
               else [f"from {TARGET_MODULE} import ManagerConfig", f"from {module} import {root}"])
    lines = [
        "from properties.families.v1.request.stand_ins import ManagerRequest, RequestStatus",
        *imports,
        ("from properties.families.v1.stand_ins import LoraRef"
         "  # noqa: F401  (requests with an adapter)"),
        "",
        f"target = {factory}(){comment}",
        f"config = ManagerConfig(\n    num_blocks={c.num_blocks}, groups={c.groups!r}, "
        f"hash_block_size={c.hash_block_size},\n    max_model_len={c.max_model_len}, "
        f"events={c.events}{', log_stats=True' if c.log_stats else ''})",
        "mgr = target.create(config)",
        f"hasher = target.hasher({config.hash_block_size})",
        "",
        *traced(target, config, program)[0],
        "",
        "print('ref_cnt', [b.ref_cnt for b in mgr.block_pool.blocks])",
        "print('hashed', [b.block_id for b in mgr.block_pool.blocks if b.block_hash is not None])",
    ]
    return lines


def render(target: ManagerTarget, config: ManagerConfig, program: Sequence[ops.ROp],
           title: str) -> str:
    """A whole script for a release's manager (``conformance/vllm-<minor>/<id>.py``)."""
    verdict = traced(target, config, program)[1]
    factory = RELEASE_FACTORIES.get(target.version, "vllm_v1_manager")
    lines = [
        f'"""{title}\n\nThe suite reports:\n' + textwrap.fill(verdict, 96) + '\n"""',
        "",
        *script_body(target, config, program, TARGET_MODULE, factory,
                     f"  # vLLM {target.version}"),
        "",
    ]
    return "\n".join(lines)
