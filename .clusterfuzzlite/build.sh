#!/bin/bash -eu
# Builds every fuzz/families/*/fuzz_*.py harness with compile_python_fuzzer (PyInstaller + atheris).
# Each drives one of its family's Hypothesis machines, so it needs no seed corpus or dictionary.
cd "$SRC/prefixcache"
python3 -m pip install .

# PyInstaller sees static imports only; these are loaded by name at run time:
#   - families: entry points of group prefixcache.families (the installed metadata),
#     their modules and models (properties.families.*, models.families.*);
#   - a family's machines (properties.families.*.machines.test_*), found by
#     fuzz.core.machine_harness as the package's submodules when no source file is on disk;
#   - targets by spec (prefixcache.*) and the fuzz tools a family names (fuzz.families.*);
#   - atheris itself (fuzz.core.instrumentation imports it only when it is installed).
for fuzzer in fuzz/families/*/fuzz_*.py; do
  compile_python_fuzzer "$fuzzer" \
    --copy-metadata=prefixcache \
    --collect-submodules=prefixcache \
    --collect-submodules=models \
    --collect-submodules=properties \
    --collect-submodules=fuzz \
    --hidden-import=atheris
done
