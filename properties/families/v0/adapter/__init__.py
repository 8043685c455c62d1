"""The one place where API differences between allocators live.

:class:`FamilyAdapter` speaks to any allocator of the vLLM-v0 / Aphrodite family, including the
bundled one: it turns each operation of the vocabulary into a call plan (executed by the runner,
printed by the reproducer), classifies errors, and reads the private state the upstream family
shares (content map, evictor, refcounts) for introspection. Other allocators subclass it and
override what differs.

One module per operation group, mirroring the model's ``models/families/v0/ops/<group>.py``:
each defines a mixin holding its operations' ``_plan_<kind>`` methods (and the capability
detection only they use); :meth:`AdapterCore.plan` dispatches by ``op.kind``. ``values``
(the ``checked_*`` readers, :class:`Misbehaviour`, :class:`Unsupported`), ``plan``
(:class:`Plan` and expression helpers) and ``base`` (:class:`AdapterCore`: construction,
capabilities, environment, dispatch, error classification) import no group. This module
composes the mixins and re-exports what the rest of the suite imports, including the
stand-ins reproducers reach as ``__import__('properties.families.v0.adapter', ...)``.
"""

from __future__ import annotations

from properties.families.v0.adapter.allocate import AllocatePlans
from properties.families.v0.adapter.append import AppendPlans
from properties.families.v0.adapter.base import KEY_FIELDS, AdapterCore, sequence_extra_hash
from properties.families.v0.adapter.construction import ConstructionPlans
from properties.families.v0.adapter.device import DevicePlans
from properties.families.v0.adapter.evictor import EvictorPlans
from properties.families.v0.adapter.fork import ForkPlans
from properties.families.v0.adapter.free import FreePlans
from properties.families.v0.adapter.hashing import HashingPlans
from properties.families.v0.adapter.malformed import MalformedPlans
from properties.families.v0.adapter.marks import MarkPlans
from properties.families.v0.adapter.null_block import NullBlockPlans
from properties.families.v0.adapter.observation import ObservationReads
from properties.families.v0.adapter.plan import Plan, block, table
from properties.families.v0.adapter.queries import QueryPlans
from properties.families.v0.adapter.refcount import IdOnlyBlock, RefcountPlans
from properties.families.v0.adapter.swap import SwapPlans, swap_by_hand
from properties.families.v0.adapter.table_queries import TableQueryPlans
from properties.families.v0.adapter.tables import TablePlans
from properties.families.v0.adapter.tracker_misuse import TrackerMisusePlans
from properties.families.v0.adapter.trackers import EngineSeq, TrackerPlans
from properties.families.v0.adapter.values import (
    Misbehaviour,
    Unsupported,
    checked_block,
    checked_blocks,
    checked_bool,
    checked_id_set,
    checked_int,
    checked_ints,
    checked_mapping,
    checked_number,
    checked_opt_int,
    checked_pairs,
    is_int,
    shown,
    wrong_type,
)

__all__ = [
    "KEY_FIELDS",
    "AdapterCore",
    "EngineSeq",
    "FamilyAdapter",
    "IdOnlyBlock",
    "Misbehaviour",
    "Plan",
    "Unsupported",
    "block",
    "checked_block",
    "checked_blocks",
    "checked_bool",
    "checked_id_set",
    "checked_int",
    "checked_ints",
    "checked_mapping",
    "checked_number",
    "checked_opt_int",
    "checked_pairs",
    "is_int",
    "sequence_extra_hash",
    "shown",
    "swap_by_hand",
    "table",
    "wrong_type",
]


class FamilyAdapter(AllocatePlans, AppendPlans, ForkPlans, FreePlans, SwapPlans, MarkPlans,
                    QueryPlans, TablePlans, NullBlockPlans, TableQueryPlans, DevicePlans,
                    HashingPlans, ConstructionPlans, TrackerMisusePlans, TrackerPlans,
                    MalformedPlans, EvictorPlans, RefcountPlans, ObservationReads, AdapterCore):
    """Adapter for ``DeviceAwareBlockAllocator``-compatible allocators (vLLM v0, Aphrodite, ours).

    ``alloc`` is a live allocator; ``block_size`` its block size. Generation differences are
    detected from the methods the allocator has. ``extra_key_function`` (``module:callable``,
    a target's claim) renders :class:`~models.families.v0.operations.ExtraKey` values; see
    :meth:`_detect_extra_keys` for the default. Every group's plans and reads, composed: a
    group module's mixin lists its operations, no method is defined twice.
    """
