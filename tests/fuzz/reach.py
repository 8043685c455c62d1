"""Input bytes that steer the fuzz decoder to one production, shared by the reach tests."""

from __future__ import annotations

from fuzz.families.v0.decoder import Decoder, Level
from properties.core.targets import Target


def extension_bytes(config: bytes, level: Level, target: Target, production: str,
                    **features: bool) -> bytes:
    """The opcode byte of the extension entry, then the byte that picks ``production``, for a
    decoder with the adapter ``features`` (``Decoder``'s keywords: trackers, block_info, ...)."""
    decoder = Decoder(config, level, target.caps, **features)
    names = [make.__name__ for make in decoder.table]
    extensions = [make.__name__ for make in decoder.extensions]
    return bytes([names.index("_extension"), extensions.index(production)])
