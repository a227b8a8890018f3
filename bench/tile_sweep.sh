#!/usr/bin/env bash
# Tile-shape sweep of the BF16 kernels on the GPU: one process per shape (fresh autotune),
# FLAMIA only, two workloads. Usage: bench/tile_sweep.sh OUT_DIR
set -u
out=${1:-bench/results}
run() {  # name, then VAR=M,N assignments
  local name=$1; shift
  echo "== $name $*"
  env "$@" python -m bench.attention --quick --dists one_doc u32_1024 --providers flamia-bf16 \
    --out "$out" --tag "_sweep_$name" 2>&1 | grep -E '^\| (one_doc|u32)' 
}
run base
run fwd128x128 FLAMIA_FWD_BLOCKS=128,128
run dkdv32x128 FLAMIA_BWD_BLOCKS=32,128
run dkdv128x128 FLAMIA_BWD_BLOCKS=128,128
run dkdv64x64 FLAMIA_BWD_BLOCKS=64,64
run dq128x128 FLAMIA_DQ_BLOCKS=128,128
run dq64x64 FLAMIA_DQ_BLOCKS=64,64
run dq128x32 FLAMIA_DQ_BLOCKS=128,32
