"""The model's radix tree: which page-aligned token runs are cached, with which slots, how
often each node is locked and when it was last used.

Its shape is the contract's, not an implementation's: nodes split only where two keys diverge
(at a page boundary) or where a match ends inside one, a new node holds an insert's unmatched
tail, and nothing merges. Every match and insert stamps the nodes it walks (a node it splits
whole, both halves) with a new time, so eviction's order (least recently used unlocked leaf
first, ties by node age) is determined by the program. Keys in different ``extra_key``
namespaces meet only at the root.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

Key = tuple[str | None, tuple[int, ...]]


@dataclass(eq=False)
class Node:
    """A run of tokens and their slots; ``id`` orders nodes by creation."""

    id: int
    key: list[int]
    value: list[int]
    extra_key: str | None
    parent: Node | None
    time: int
    lock: int = 0
    children: dict[object, Node] = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"Node({self.id}, {self.key}, lock={self.lock})"


@dataclass(frozen=True, slots=True)
class Inserted:
    """What an insert did: ``prefix_len`` tokens were held already, ``adopted`` slots became
    the tree's, ``duplicates`` are the caller's slots it frees (positions ``[prev,
    prefix_len)`` whose slot differs from the tree's)."""

    prefix_len: int
    node: Node
    adopted: tuple[int, ...]
    duplicates: tuple[int, ...]


class ModelTree:
    """See the module docstring."""

    def __init__(self, page_size: int) -> None:
        self.page_size = page_size
        self.root = Node(0, [], [], None, None, 0, lock=1)
        self._ids = 1
        self._clock = 0

    # ------------------------------------------------------------------ reads

    def aligned(self, tokens: Sequence[int]) -> list[int]:
        return list(tokens[: len(tokens) // self.page_size * self.page_size])

    def nodes(self) -> Iterator[Node]:
        stack = list(self.root.children.values())
        while stack:
            node = stack.pop()
            yield node
            stack.extend(node.children.values())

    def sizes(self) -> tuple[int, int]:
        """(evictable, protected) tokens: those of unlocked and of locked nodes."""
        evictable = sum(len(n.key) for n in self.nodes() if n.lock == 0)
        protected = sum(len(n.key) for n in self.nodes() if n.lock > 0)
        return evictable, protected

    def slots(self) -> set[int]:
        return {s for n in self.nodes() for s in n.value}

    def locked_slots(self) -> set[int]:
        return {s for n in self.nodes() if n.lock > 0 for s in n.value}

    def peek(self, tokens: Sequence[int], extra_key: str | None) -> tuple[int, list[int]]:
        """The cached prefix's length and slots, changing nothing."""
        node, pos, child, at = self._walk(self.aligned(tokens), extra_key)
        slots = self.path_slots(node) + (child.value[:at] if child is not None else [])
        return pos + at, slots

    def path_slots(self, node: Node) -> list[int]:
        parts: list[list[int]] = []
        while node is not self.root:
            parts.append(node.value)
            node = node.parent  # type: ignore[assignment]
        return [s for part in reversed(parts) for s in part]

    # ------------------------------------------------------------------ writes

    def match(self, tokens: Sequence[int], extra_key: str | None
              ) -> tuple[Node, int, list[int]]:
        """The cached prefix (node ending exactly there, length, slots); stamps the path."""
        key = self.aligned(tokens)
        if not key:
            return self.root, 0, []
        node, pos, _ = self._reach(*self._walk(key, extra_key))
        return node, pos, self.path_slots(node)

    def insert(self, tokens: Sequence[int], value: Sequence[int], extra_key: str | None,
               prev_prefix_len: int) -> Inserted:
        key = self.aligned(tokens)
        n = len(key)
        value = list(value[:n])
        if n == 0:
            return Inserted(0, self.root, (), ())
        node, pos, child, at = self._walk(key, extra_key)
        held = self.path_slots(node) + (child.value[:at] if child is not None else [])
        matched = pos + at
        duplicates = tuple(value[i] for i in range(prev_prefix_len, matched)
                           if value[i] != held[i])
        node, pos, stamp = self._reach(node, pos, child, at)
        adopted: tuple[int, ...] = ()
        if pos < n:
            leaf = self._node(key[pos:], value[pos:], extra_key, node, stamp)
            node.children[self._child_key(leaf)] = leaf
            adopted = tuple(value[pos:])
            node = leaf
        return Inserted(matched, node, adopted, duplicates)

    def lock(self, node: Node) -> None:
        x = node
        while x is not self.root:
            x.lock += 1
            x = x.parent  # type: ignore[assignment]

    def unlock(self, node: Node) -> None:
        x = node
        while x is not self.root:
            x.lock -= 1
            x = x.parent  # type: ignore[assignment]

    def evict(self, num_tokens: int) -> tuple[int, list[Node]]:
        """Unlocked leaves, least recently used first (ties: the older node), until
        ``num_tokens`` are evicted or none is left: (tokens evicted, the nodes)."""
        evicted, gone = 0, []
        while evicted < num_tokens:
            leaves = [n for n in self.nodes() if n.lock == 0 and not n.children]
            if not leaves:
                break
            victim = min(leaves, key=lambda n: (n.time, n.id))
            parent = victim.parent
            if parent is None:
                raise RuntimeError(f"{victim} is in the tree without a parent")
            del parent.children[self._child_key(victim)]
            victim.parent = None
            evicted += len(victim.key)
            gone.append(victim)
        return evicted, gone

    def remove(self, slots: set[int]) -> str | None:
        """Drop the tokens holding ``slots`` (an eviction the target chose, FULL + SWA): each
        node keeps the tokens before its first dropped one; None, or why this is no eviction
        (a dropped token with a kept descendant, or a locked one)."""
        for node in list(self.nodes()):
            cut = next((i for i, s in enumerate(node.value) if s in slots), None)
            if cut is None:
                continue
            kept = [s for s in node.value[cut:] if s not in slots]
            if kept or any(s not in slots for c in node.children.values()
                           for s in self.subtree_slots(c)):
                return f"{node} loses slot {node.value[cut]} but keeps later tokens"
            if node.lock:
                return f"{node} is locked"
        for node in list(self.nodes()):
            cut = next((i for i, s in enumerate(node.value) if s in slots), None)
            if cut is None or node.parent is None:
                continue
            if cut == 0:
                del node.parent.children[self._child_key(node)]
                node.parent = None
            else:
                node.key, node.value = node.key[:cut], node.value[:cut]
        return None

    def subtree_slots(self, node: Node) -> list[int]:
        out, stack = [], [node]
        while stack:
            x = stack.pop()
            out += x.value
            stack.extend(x.children.values())
        return out

    def replace_slot(self, old: int, new: int) -> None:
        """The tree's token at slot ``old`` now holds slot ``new`` (an insert that took the
        caller's slot for a token the tree held)."""
        for node in self.nodes():
            if old in node.value:
                node.value[node.value.index(old)] = new
                return
        raise RuntimeError(f"slot {old} is not in the tree")

    # ------------------------------------------------------------------ internals

    def _tick(self) -> int:
        self._clock += 1
        return self._clock

    def _node(self, key: list[int], value: list[int], extra_key: str | None,
              parent: Node | None, time: int) -> Node:
        self._ids += 1
        return Node(self._ids - 1, key, value, extra_key, parent, time)

    def _first(self, tokens: Sequence[int], pos: int) -> object:
        return tuple(tokens[pos:pos + self.page_size])

    def _child_key(self, node: Node) -> object:
        first = self._first(node.key, 0)
        return (node.extra_key, first) if node.parent is self.root else first

    def _walk(self, key: list[int], extra_key: str | None
              ) -> tuple[Node, int, Node | None, int]:
        """(deepest node matched whole, its depth, the child matched in part or None, how
        many of its tokens match: whole pages, at least one)."""
        node, pos, ps = self.root, 0, self.page_size
        while pos < len(key):
            first = self._first(key, pos)
            child = node.children.get((extra_key, first) if node is self.root else first)
            if child is None:
                break
            size = len(child.key)
            if key[pos:pos + size] == child.key:
                node, pos = child, pos + size
                continue
            common = 0
            while common < min(size, len(key) - pos) and child.key[common] == key[pos + common]:
                common += 1
            return node, pos, child, common // ps * ps
        return node, pos, None, 0

    def _reach(self, node: Node, pos: int, child: Node | None, at: int
               ) -> tuple[Node, int, int]:
        """After a walk (:meth:`_walk`): stamp the path with a fresh time and, where the key
        ends ``at`` tokens into ``child``, split it there; the node ending at the key's match,
        the match's length and the stamp."""
        stamp = self._tick()
        self._stamp(node, stamp)
        if child is not None:
            child.time = stamp
            node = self._split(child, at)
            pos += at
        return node, pos, stamp

    def _stamp(self, node: Node, stamp: int) -> None:
        x: Node | None = node
        while x is not None and x is not self.root:
            x.time = stamp
            x = x.parent

    def _split(self, child: Node, at: int) -> Node:
        """Cut ``child`` after ``at`` tokens; the new parent keeps its locks and time."""
        parent = child.parent
        if parent is None:
            raise RuntimeError(f"split of {child}, which left the tree")
        old = self._child_key(child)
        new = self._node(child.key[:at], child.value[:at], child.extra_key, parent, child.time)
        new.lock = child.lock
        child.key, child.value, child.parent = child.key[at:], child.value[at:], new
        new.children[self._child_key(child)] = child
        parent.children[old] = new
        return new
