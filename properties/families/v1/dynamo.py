"""Load NVIDIA Dynamo's KV router (``RadixTree`` of the ``ai-dynamo-runtime`` wheel) without
installing it: the router the v1 pool's KV events are also judged by (:mod:`.router`).

The wheel (pinned: :data:`VERSION`) is fetched into the cache like the vLLM wheels
(``python -m properties.upstream fetch dynamo``, or :func:`fetch`), never pip-installed. An
extension module cannot be imported from a zip, so its ``dynamo/`` package alone is extracted
once to ``<cache>/ai_dynamo_runtime-<version>-ext/`` and ``dynamo._core`` (a Rust PyO3
extension, abi3, CPU only) is loaded from there under its own name, without registering a
``dynamo`` package (a user's installed Dynamo is left alone). The rest of the wheel (the
``dynamo.llm`` / ``dynamo.runtime`` Python packages) is never executed.

No wheel, or one that does not load: :func:`load_router` returns None and :func:`status`
says why; the v1 pool judge then runs without the router and the report header says so.
"""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import os
import sys
import threading
import zipfile
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from properties.core.sources import (
    Runner,
    UpstreamError,
    cache_dir,
    extract_member,
    pip_download,
)

__all__ = ["FETCH_COMMAND", "VERSION", "cached_wheel", "fetch", "load_router", "status"]

VERSION = "1.6.1"
DISTRIBUTION = "ai-dynamo-runtime"
FETCH_COMMAND = "python -m properties.upstream fetch dynamo"
#: ``PREFIXCACHE_DYNAMO=off`` runs the v1 pool judge without the router even when cached.
SWITCH_ENV = "PREFIXCACHE_DYNAMO"
_WHEEL_GLOB = f"ai_dynamo_runtime-{VERSION}-*.whl"
_CORE = "dynamo/_core.abi3.so"

_LOCK = threading.Lock()
_LOADED: dict[str, ModuleType | str] = {}  # "core": the module, or why it did not load


def cached_wheel() -> Path | None:
    """The cached ``ai-dynamo-runtime`` wheel of :data:`VERSION`, if fetched."""
    found = sorted(cache_dir().glob(_WHEEL_GLOB))
    return found[0] if found else None


def fetch(dest: Path | None = None, runner: Runner | None = None) -> Path:
    """Download the pinned wheel (no dependencies) into ``dest`` (default: the cache)."""
    return pip_download(f"{DISTRIBUTION}=={VERSION}", cache_dir() if dest is None else dest,
                        _WHEEL_GLOB, ("--only-binary", ":all:"), runner)


def extract(wheel: Path) -> Path:
    """The wheel's ``dynamo/`` package extracted under the cache
    (:func:`~properties.core.sources.extract_member`); returns the directory holding
    ``dynamo/``."""
    root = cache_dir() / f"ai_dynamo_runtime-{VERSION}-ext"
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            if info.filename.startswith("dynamo/") and not info.is_dir():
                extract_member(archive, info.filename, root)
    return root


def _load() -> ModuleType | str:
    if os.environ.get(SWITCH_ENV, "").lower() in ("0", "off", "no", "false"):
        return f"off (${SWITCH_ENV})"
    wheel = cached_wheel()
    if wheel is None:
        return f"none (fetch with `{FETCH_COMMAND}`)"
    # Its router logs each event it skips as a warning (tracing, straight to stderr); the
    # judge records them itself. ``$DYN_LOG`` set by the user wins.
    os.environ.setdefault("DYN_LOG", "error")
    try:
        path = extract(wheel) / _CORE
        # Loaded as ``dynamo._core`` (its init symbol is PyInit__core) but not registered in
        # sys.modules: no ``dynamo`` package is created or shadowed.
        loader = importlib.machinery.ExtensionFileLoader("dynamo._core", str(path))
        spec = importlib.util.spec_from_file_location("dynamo._core", str(path), loader=loader)
        if spec is None:
            return f"none ({path} is not an extension module)"
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
        module.RadixTree()  # the one class the judge needs must construct
    except Exception as exc:  # a broken or foreign wheel: the judge runs without the router
        return f"none ({wheel.name} does not load: {type(exc).__name__}: {exc})"
    return module


def load_router() -> ModuleType | None:
    """``dynamo._core`` of the cached wheel (loaded once per process), or None."""
    with _LOCK:
        if "core" not in _LOADED:
            _LOADED["core"] = _load()
        core = _LOADED["core"]
    return core if isinstance(core, ModuleType) else None


def status() -> str:
    """The report header's router line: ``Dynamo RadixTree 1.6.1`` or why there is none."""
    core = load_router()
    return f"Dynamo RadixTree {VERSION}" if core is not None else str(_LOADED["core"])


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: ``fetch`` downloads the pinned wheel (and, into the cache, extracts it); ``info``
    loads it and says what loaded."""
    parser = argparse.ArgumentParser(prog="python -m properties.upstream ... dynamo")
    commands = parser.add_subparsers(dest="command", required=True)
    sub = commands.add_parser("fetch")
    sub.add_argument("--dest", type=Path, default=None)
    commands.add_parser("info")
    args = parser.parse_args(argv)
    if args.command == "fetch":
        try:
            wheel = fetch(args.dest)
            print(wheel)
            if args.dest is None:
                extract(wheel)  # here, not in the first run that loads it
        except UpstreamError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        return 0
    print(f"router: {status()}")
    return 0 if load_router() is not None else 1
