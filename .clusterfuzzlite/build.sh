#!/bin/bash -eu
# Builds every fuzz/families/*/fuzz_*.py harness with compile_python_fuzzer (PyInstaller + atheris), and
# ships each harness's seed corpus and dictionary under the names OSS-Fuzz looks for.
cd "$SRC/prefixcache"
python3 -m pip install .

for fuzzer in fuzz/families/*/fuzz_*.py; do
  dir=$(dirname "$fuzzer")
  name=$(basename "$fuzzer" .py)        # fuzz_block_level
  short=${name#fuzz_}                    # block_level
  # The allocator under test is chosen at run time by spec; bundle it explicitly.
  compile_python_fuzzer "$fuzzer" \
    --hidden-import=prefixcache.cpu_gpu_block_allocator \
    --hidden-import=prefixcache.block_table
  if [ -d "$dir/corpus/$short" ]; then
    (cd "$dir/corpus/$short" && zip -q -j "$OUT/${name}_seed_corpus.zip" ./*)
  fi
  if [ -f "$dir/$short.dict" ]; then
    cp "$dir/$short.dict" "$OUT/$name.dict"
  fi
done
