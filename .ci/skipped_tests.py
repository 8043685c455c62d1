"""Print the test functions of which a pytest run skipped a case, one node id per line, from
its JUnit XML.

``.ci/run`` gives the fresh-clone run (no upstream wheels cached) ``--junitxml``; the tests
that skipped there, for want of a wheel or torch, are what the later wheel step runs, so
nothing runs twice.
Usage: ``skipped_tests.py REPORT.xml [PATH_PREFIX ...]`` (only ids under one of the prefixes).
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def node_id(case: ET.Element) -> str:
    """``file::Class::name`` from a test case: ``classname`` is the dotted module path, then the
    class names; the module is its longest prefix naming a file here (the case's ``file`` is
    not used: a state machine's ``runTest`` is defined in Hypothesis's own module)."""
    parts = case.attrib["classname"].split(".")
    for cut in range(len(parts), 0, -1):
        path = "/".join(parts[:cut]) + ".py"
        if Path(path).is_file():
            return "::".join([path, *parts[cut:], case.attrib["name"]])
    raise SystemExit(f"no test file for {case.attrib['classname']}")


def main(argv: list[str]) -> int:
    report, *prefixes = argv
    seen: set[str] = set()
    for case in ET.parse(report).iter("testcase"):
        if case.find("skipped") is None:
            continue
        # The whole function, every parameter: a parameter id may name what was missing
        # (``[None]`` for an uncached wheel), so the fresh run's ids need not exist here.
        nid = node_id(case).split("[", 1)[0]
        if nid not in seen and (not prefixes or nid.startswith(tuple(prefixes))):
            seen.add(nid)
            print(nid)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
