"""Exact content identities.

Every KV slot and every cached block is named by the *whole* token prefix it stands for, plus
the extra key (LoRA id, cache salt, ...) of each block on the way. Prefixes are interned in a
trie whose edges are ``(token, extra_hash)``, so an identity is one small int: equal ints mean
equal content, exactly, whatever a target's hash function does. Node 0 is the empty prefix.
A full block's content key is the node reached after its last token.
"""

from __future__ import annotations

from collections.abc import Iterable

from models.families.v0.ops.values import Extra

ROOT = 0


class ContentTrie:
    """Append-only interning of prefixes; shared by every copy of the model (never mutated in
    a way a copy could observe, since nodes are only added)."""

    __slots__ = ("_depth", "_edges", "_extra", "_parent", "_token")

    def __init__(self) -> None:
        self._edges: dict[tuple[int, int, Extra], int] = {}
        self._parent: list[int] = [ROOT]
        self._token: list[int] = [0]
        self._extra: list[Extra] = [None]
        self._depth: list[int] = [0]

    def step(self, node: int, token: int, extra: Extra) -> int:
        """The node for ``node``'s prefix followed by ``token`` (in a block keyed by ``extra``)."""
        key = (node, token, extra)
        nxt = self._edges.get(key)
        if nxt is None:
            nxt = len(self._depth)
            self._edges[key] = nxt
            self._parent.append(node)
            self._token.append(token)
            self._extra.append(extra)
            self._depth.append(self._depth[node] + 1)
        return nxt

    def walk(self, node: int, tokens: Iterable[int], extra: Extra) -> list[int]:
        """The identity of each successive slot when ``tokens`` follow ``node``."""
        out: list[int] = []
        for tok in tokens:
            node = self.step(node, tok, extra)
            out.append(node)
        return out

    def depth(self, node: int) -> int:
        """Tokens in the prefix (a full block's ``num_tokens_total``)."""
        return self._depth[node]

    def back(self, node: int, n: int) -> tuple[int, tuple[int, ...], Extra]:
        """Undo the last ``n`` tokens: (ancestor node, those tokens, the extra of the last)."""
        extra = self._extra[node]
        toks: list[int] = []
        for _ in range(n):
            toks.append(self._token[node])
            node = self._parent[node]
        toks.reverse()
        return node, tuple(toks), extra
