"""Re-run chosen mutants against other tests: one forked pytest per mutant, inside
mutmut's ``mutants/`` tree (mutmut's trampolines read the mutant from MUTANT_UNDER_TEST).

Usage: python mutwork/rerun.py NAMES_FILE OUT_TSV [pytest args...]
Appends ``name<TAB>exit code<TAB>seconds`` per mutant (0 survived, 1 killed, negative: signal);
names already in OUT_TSV are skipped, so an interrupted run resumes.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

MUTANTS = Path.cwd() / "mutants"
TIMEOUT_S = 600


def main() -> None:
    names_file, out_file, *args = sys.argv[1:]
    names_path, out = Path(names_file).resolve(), Path(out_file).resolve()
    os.chdir(MUTANTS)
    sys.path.insert(0, str(MUTANTS))
    import pytest  # imported after the path change so children share warm imports

    import prefixcache.cpu_gpu_block_allocator  # noqa: F401
    import properties.core.plugin  # noqa: F401

    done = {line.split("\t")[0] for line in out.read_text().splitlines()} if out.exists() else set()
    for name in (n for n in names_path.read_text().split() if n not in done):
        start = time.monotonic()
        pid = os.fork()
        if pid == 0:
            os.environ["MUTANT_UNDER_TEST"] = name
            signal.alarm(TIMEOUT_S)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            os._exit(
                int(pytest.main(["-x", "-q", "-p", "no:xdist", "-p", "no:cacheprovider", *args]))
            )
        _, status = os.waitpid(pid, 0)
        with out.open("a") as fh:
            fh.write(
                f"{name}\t{os.waitstatus_to_exitcode(status)}\t{time.monotonic() - start:.1f}\n"
            )


if __name__ == "__main__":
    main()
