"""The null block: one GPU block taken forever by the first ``allocate_or_get_null_block()``
(``GetNullBlock``), which sliding-window tables put where the window dropped blocks. Reads of
it forward the empty block it wraps (``NullBlockQuery``); every write to it must be refused
(``NullBlockMisuse``): it is read-only, and its id is never released or shared."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from models.families.v0.invariants import Family
from models.families.v0.ops.base import Op, Out
from models.families.v0.ops.values import Dev

if TYPE_CHECKING:
    from models.families.v0.allocator_model import Model

F = Family

#: The writes :class:`NullBlockMisuse` tries (drawn by the machines and the fuzz decoder).
NULL_BLOCK_WRITES: tuple[str, ...] = ("append", "set_id", "fork")
#: Every :class:`NullBlockMisuse`: the writes, and the GPU allocator's own ``free`` and
#: ``fork`` of the null block (tried in a once-per-null-block sweep only, so seeded draws stay
#: as they were).
NULL_BLOCK_MISUSES: tuple[str, ...] = (*NULL_BLOCK_WRITES, "device_free", "device_fork")


def _taken(m: Model) -> None:
    if m.null_id is None:
        raise Out("the null block is not taken yet")


@dataclass(frozen=True, slots=True)
class GetNullBlock(Op):
    """``allocate_or_get_null_block()``: the first call takes one GPU block forever."""

    kind: ClassVar[str] = "null_block"
    value_names_ids: ClassVar[bool] = True  # the null block's id

    def cost(self, m: Model) -> tuple[int, Dev]:
        return int(m.null_id is None), Dev.GPU

    def step(self, m: Model) -> None:
        got = m.c.outcome.value
        hint = got if isinstance(got, int) else None
        if m.null_id is None:
            m.null_id = m.fresh(Dev.GPU, hint)
            m.blocks.made += 1  # the null block is a block object too
        elif got != m.null_id:
            m.c.flag(F.LEAK, "the null block changed", expected=m.null_id, observed=got)


@dataclass(frozen=True, slots=True)
class NullBlockQuery(Op):
    """Once the null block exists: ``allocate_or_get_null_block()`` again, then its
    ``block_id``, ``token_ids``, ``num_empty_slots``, ``is_full``, ``prev_block``,
    ``content_hash`` and (vLLM generation) ``extra_hash``; with ``stamp`` (prefix-caching
    targets) also ``last_accessed`` set to ``stamp`` and ``computed`` to ``False``, both read
    back; last, ``free`` of it, which the allocator ignores. Value: ``{read: value}``
    (``prev_block`` as ``no_prev_block``: whether it is ``None``)."""

    kind: ClassVar[str] = "null_block_query"
    mutates: ClassVar[bool] = False
    stamp: float | None = None

    def misuse(self, m: Model) -> str | None:
        _taken(m)
        return None

    def step(self, m: Model) -> None:
        got: Any = m.c.outcome.value
        if not isinstance(got, dict):
            m.c.flag(F.TABLE, "null block read-outs missing", observed=got)
            return
        if got.get("block_id") != m.null_id:
            m.c.flag(F.LEAK, "the null block changed", expected=m.null_id,
                     observed=got.get("block_id"))
        want: dict[str, object] = {"token_ids": [], "num_empty_slots": m.bs, "is_full": False,
                                   "no_prev_block": True, "content_hash": None}
        if "extra_hash" in got:
            want["extra_hash"] = None
        if self.stamp is not None:
            want["computed"] = False
        for read, value in want.items():
            if got.get(read, "missing") != value:
                m.c.flag(F.TABLE, f"the null block's {read}: it forwards the empty block it "
                         "wraps", expected=value, observed=got.get(read, "missing"))
        if self.stamp is not None and got.get("last_accessed") != self.stamp:
            m.c.flag(F.LRU, "the null block's last_accessed: a write reads back",
                     expected=self.stamp, observed=got.get("last_accessed"))


@dataclass(frozen=True, slots=True)
class NullBlockMisuse(Op):
    """A write to the existing null block: ``append_token_ids([1])`` (``"append"``), setting
    its ``block_id`` (``"set_id"``) or ``alloc.fork`` of it (``"fork"``); or ``free`` or
    ``fork`` of it on the GPU allocator itself (``"device_free"``, ``"device_fork"``: the
    device-aware ``free`` ignores the null block, a device's own must neither release nor
    share its id). Always a misuse."""

    kind: ClassVar[str] = "null_block_misuse"
    action: str

    def misuse(self, m: Model) -> str | None:
        _taken(m)
        if self.action not in NULL_BLOCK_MISUSES:
            raise Out(f"unknown null block write {self.action!r}")
        if self.action in ("device_free", "device_fork"):
            return (f"{self.action.removeprefix('device_')} of the null block on the GPU "
                    "allocator (its id is never released or shared)")
        return f"{self.action} on the null block (read-only)"
