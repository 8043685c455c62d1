#!/bin/bash -eu
# Builds every fuzz/families/*/fuzz_*.py harness with compile_python_fuzzer (PyInstaller + atheris), and
# ships each harness's seed corpus and dictionary under the names OSS-Fuzz looks for.
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
  dir=$(dirname "$fuzzer")
  name=$(basename "$fuzzer" .py)        # fuzz_block_level
  short=${name#fuzz_}                    # block_level
  compile_python_fuzzer "$fuzzer" \
    --copy-metadata=prefixcache \
    --collect-submodules=prefixcache \
    --collect-submodules=models \
    --collect-submodules=properties \
    --collect-submodules=fuzz \
    --hidden-import=atheris
  if [ -d "$dir/corpus/$short" ]; then
    (cd "$dir/corpus/$short" && zip -q -j "$OUT/${name}_seed_corpus.zip" ./*)
  fi
  if [ -f "$dir/$short.dict" ]; then
    cp "$dir/$short.dict" "$OUT/$name.dict"
  fi
done
