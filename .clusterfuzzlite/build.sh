#!/bin/bash -eu
# Builds every fuzz/fuzz_*.py harness with compile_python_fuzzer (PyInstaller + atheris), and
# ships each harness's seed corpus and dictionary under the names OSS-Fuzz looks for.
cd "$SRC/prefixcache"
python3 -m pip install .

for fuzzer in fuzz/fuzz_*.py; do
  name=$(basename "$fuzzer" .py)        # fuzz_block_level
  short=${name#fuzz_}                    # block_level
  # The allocator under test is chosen at run time by spec; bundle it explicitly.
  compile_python_fuzzer "$fuzzer" \
    --hidden-import=prefixcache.cpu_gpu_block_allocator \
    --hidden-import=prefixcache.block_table
  if [ -d "fuzz/corpus/$short" ]; then
    (cd "fuzz/corpus/$short" && zip -q -j "$OUT/${name}_seed_corpus.zip" ./*)
  fi
  if [ -f "fuzz/$short.dict" ]; then
    cp "fuzz/$short.dict" "$OUT/$name.dict"
  fi
done
