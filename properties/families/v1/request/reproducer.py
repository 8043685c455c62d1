"""Plain reproducer scripts: a request-level program as direct calls on vLLM's manager.

The program is replayed once with recording on (:attr:`RequestExecutor.trace`); the script
makes exactly the calls the executor made (loading the release through the manager loader,
building stand-in requests hashed by the release's own hasher) and prints what a reader needs:
each hit, each allocation, and at the end every block's reference count and hash.
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


def render(target: ManagerTarget, config: ManagerConfig, program: Sequence[ops.ROp],
           title: str) -> str:
    ex = RequestExecutor(target, config)
    ex.trace = []
    verdict = "no violation"
    try:
        for op in program:
            ex.step(op)
    except Violation as v:
        verdict = str(v).splitlines()[0]
    c = config
    factory = RELEASE_FACTORIES.get(target.version, "vllm_v1_manager")
    lines = [
        f'"""{title}\n\nThe suite reports:\n' + textwrap.fill(verdict, 96) + '\n"""',
        "",
        "from properties.families.v1.request.stand_ins import ManagerRequest, RequestStatus",
        f"from properties.families.v1.request.target import ManagerConfig, {factory}",
        ("from properties.families.v1.stand_ins import LoraRef"
         "  # noqa: F401  (requests with an adapter)"),
        "",
        f"target = {factory}()  # vLLM {target.version}",
        f"config = ManagerConfig(\n    num_blocks={c.num_blocks}, groups={c.groups!r}, "
        f"hash_block_size={c.hash_block_size},\n    max_model_len={c.max_model_len}, "
        f"events={c.events})",
        "mgr = target.create(config)",
        f"hasher = target.hasher({config.hash_block_size})",
        "",
        *ex.trace,
        "",
        "print('ref_cnt', [b.ref_cnt for b in mgr.block_pool.blocks])",
        "print('hashed', [b.block_id for b in mgr.block_pool.blocks if b.block_hash is not None])",
        "",
    ]
    return "\n".join(lines)
