"""The v0 adapter mirrors the model's operation groups: the plan of an operation defined in
``models/families/v0/ops/<group>.py`` is in ``properties/families/v0/adapter/<group>.py``, every
operation kind has exactly one plan, and no group module overrides another's."""

from __future__ import annotations

from models.families.v0.operations import OPS_BY_KIND
from properties.families.v0.adapter import FamilyAdapter

ADAPTER = "properties.families.v0.adapter"

#: Operations the model still defines in ``operations.py`` (the evictor and refcount levels,
#: judged by their component models): the adapter module of each group.
LEGACY_GROUPS = {**{kind: "evictor" for kind in ("evictor_add", "evictor_update",
                                                   "evictor_remove", "evictor_evict",
                                                   "evictor_contains")},
                 **{kind: "refcount" for kind in ("ref_new", "ref_incr", "ref_decr", "ref_get",
                                                  "cow_appendable", "cow_record", "cow_clear")}}


def _definers(name: str) -> list[str]:
    """The modules of the classes of ``FamilyAdapter``'s MRO that define ``name``."""
    return [cls.__module__ for cls in FamilyAdapter.__mro__ if name in vars(cls)]


def test_each_kind_has_one_plan_in_its_groups_module() -> None:
    misplaced = {}
    for kind, cls in OPS_BY_KIND.items():
        if cls.__module__.startswith("models.families.v0.ops."):
            group = cls.__module__.rsplit(".", 1)[1]
        else:
            group = LEGACY_GROUPS[kind]
        where = _definers(f"_plan_{kind}")
        if where != [f"{ADAPTER}.{group}"]:
            misplaced[kind] = where
    assert misplaced == {}


def test_no_group_module_overrides_another() -> None:
    names = {name for cls in FamilyAdapter.__mro__[1:-1] for name in vars(cls)
             if not name.startswith("__")}
    twice = {name: _definers(name) for name in names if len(_definers(name)) > 1}
    assert twice == {}


def test_the_legacy_groups_list_only_operations_py_classes() -> None:
    moved = {kind for kind in LEGACY_GROUPS
             if OPS_BY_KIND[kind].__module__ != "models.families.v0.operations"}
    assert moved == set()
