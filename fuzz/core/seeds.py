"""Where a family's fuzz inputs live, and how they are read: ``fuzz/families/NAME/corpus/LEVEL``
(seed inputs, one per file) and ``fuzz/families/NAME/LEVEL.dict`` (a libFuzzer dictionary).
A missing folder or dictionary reads as empty."""

from __future__ import annotations

from pathlib import Path

from properties.core import family as families

#: Every family's harness folder: ``fuzz/families/NAME``.
FAMILIES_DIR = Path(__file__).resolve().parents[1] / "families"


def family_dir(family: str) -> Path:
    return FAMILIES_DIR / family


def corpus_dir(name: str, family: str = families.DEFAULT_FAMILY) -> Path:
    return family_dir(family) / "corpus" / name


def dict_path(name: str, family: str = families.DEFAULT_FAMILY) -> Path:
    return family_dir(family) / f"{name}.dict"


def read_corpus(*dirs: Path) -> list[bytes]:
    """Every file of ``dirs``, in name order (deterministic)."""
    out = []
    for d in dirs:
        if d.is_dir():
            out += [p.read_bytes() for p in sorted(d.iterdir()) if p.is_file()]
    return out


def read_dict(path: Path) -> list[bytes]:
    """Entries of a libFuzzer dictionary (``name="..."`` lines with ``\\xNN`` escapes)."""
    if not path.is_file():
        return []
    words = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#") or '"' not in line:
            continue
        body = line[line.index('"') + 1:line.rindex('"')]
        words.append(body.encode("latin-1").decode("unicode_escape").encode("latin-1"))
    return words
