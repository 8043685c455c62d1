"""Print the node ids of the tests a pytest run skipped, one per line, from its JUnit XML.

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
    for case in ET.parse(report).iter("testcase"):
        if case.find("skipped") is None:
            continue
        nid = node_id(case)
        if not prefixes or nid.startswith(tuple(prefixes)):
            print(nid)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
