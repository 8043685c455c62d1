"""Broken request-key builders: patches of ``make_extra_hash`` (``prefixcache/hashing.py``),
the extra-key function the suite finds in the target's package. Only requests under
``ExtraKey`` values (bytes salts and multimodal hashes, their respellings and near misses) and
malformed key-builder arguments reach these. Each change is marked ``# BUG``.
"""

from __future__ import annotations

from tests.zoo.patching import Patch


def _key(find: str, replace: str) -> tuple[Patch, ...]:
    return (Patch("hashing", "make_extra_hash", find, replace),)


#: A bool LoRA id is taken as the int it subclasses: ``True`` is silently adapter 1.
BOOL_LORA_IS_INT = _key('if isinstance(lora_id, bool):\n'
                        '    raise InvalidArgumentError("lora_id must be an int")',
                        "if isinstance(lora_id, bool):\n"
                        "    lora_id = int(lora_id)  # BUG: should be refused")

#: Only ``str`` salts are folded in: a bytes salt is silently dropped, so a request salted
#: with bytes shares blocks with unsalted ones (and no longer with the same salt as text).
BYTES_SALT_IGNORED = _key("if mm_hashes is None:",
                          "if isinstance(cache_salt, bytes):\n"
                          "    cache_salt = None  # BUG: the salt is lost\n"
                          "if mm_hashes is None:")

#: A bytes salt is folded in as its ``repr`` text, so it never matches the ``str`` salt it
#: spells (``b"a"`` and ``"a"`` are one salt): equal keys stop sharing.
BYTES_SALT_APART = _key("if mm_hashes is None:",
                        "if isinstance(cache_salt, bytes):\n"
                        "    cache_salt = repr(cache_salt)  # BUG: should be the bytes\n"
                        "if mm_hashes is None:")
