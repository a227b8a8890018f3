#!/usr/bin/env bash
# Config sweep of the MXFP8 kernels on the GPU: one process per setting (fresh compile), the
# flamia-mxfp8 provider only, one workload, with the per-kernel profile (each setting times the
# forward, dK/dV and dQ kernels at once). Tile sizes along the in-register group's axis (forward
# and dQ BLOCK_N, dK/dV BLOCK_M) stay 64 = the recipe's inreg_group. Usage: bench/fp8_sweep.sh OUT
# (FLAMIA_SWEEP_PROVIDERS: providers to run, default flamia-mxfp8)
set -u
out=${1:-bench/results}
run() {  # name, then VAR=value assignments; FLAMIA_SWEEP="name ..." runs only those
  local name=$1; shift
  if [ -n "${FLAMIA_SWEEP:-}" ] && [[ " $FLAMIA_SWEEP " != *" $name "* ]]; then return; fi
  echo "== $name $*"
  env "$@" timeout ${FLAMIA_SWEEP_TIMEOUT:-45} python -m bench.attention --quick --dists lognormal_1k \
    --providers ${FLAMIA_SWEEP_PROVIDERS:-flamia-mxfp8} --profile --out "$out" --tag "_fp8sweep_$name" 2>&1 \
    | grep -E '^\| lognormal|^- .*_attn_|^- .*elementwise_kernel<128|^- .*_quantize|^- .*_token_major|checked, rel err|Error'
}
# The token-major copy mode (FLAMIA_FP8_TRANSPOSE) of every setting
T=FLAMIA_FP8_TRANSPOSE=${FLAMIA_SWEEP_TRANSPOSE:-fused}
run w8s2 FLAMIA_AUTOTUNE=8x2 $T
run w8s3 FLAMIA_AUTOTUNE=8x3 $T
run bwd64x64_w8s2 FLAMIA_AUTOTUNE=8x2 FLAMIA_BWD_BLOCKS=64,64 $T
run small_w4s2 FLAMIA_AUTOTUNE=4x2 FLAMIA_FWD_BLOCKS=64,64 FLAMIA_DQ_BLOCKS=64,64 FLAMIA_BWD_BLOCKS=64,64 $T
run small_w4s3 FLAMIA_AUTOTUNE=4x3 FLAMIA_FWD_BLOCKS=64,64 FLAMIA_DQ_BLOCKS=64,64 FLAMIA_BWD_BLOCKS=64,64 $T
run w4s2 FLAMIA_AUTOTUNE=4x2 $T
run bwd64x64_w4s2 FLAMIA_AUTOTUNE=4x2 FLAMIA_BWD_BLOCKS=64,64 $T
# 64 x 64 dK/dV tiles, warps chosen by the autotuner per kernel (and per dK/dV part): with one
# accumulator per kernel (split) a 4-warp program fits in fewer registers, several per SM
run bwd64_auto FLAMIA_AUTOTUNE=8x3,4x3,4x2 FLAMIA_BWD_BLOCKS=64,64 $T
run all64_auto FLAMIA_AUTOTUNE=8x3,4x3,4x2 FLAMIA_FWD_BLOCKS=64,64 FLAMIA_DQ_BLOCKS=64,64 FLAMIA_BWD_BLOCKS=64,64 $T
# dK/dV as one fused kernel or as a dV-only and a dK-only kernel (FLAMIA_FP8_DKDV)
run dkdv_fused_w8s3 FLAMIA_AUTOTUNE=8x3 FLAMIA_FP8_DKDV=fused $T
run dkdv_split_w8s3 FLAMIA_AUTOTUNE=8x3 FLAMIA_FP8_DKDV=split $T
run dkdv_split_w8s2 FLAMIA_AUTOTUNE=8x2 FLAMIA_FP8_DKDV=split $T
