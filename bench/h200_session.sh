#!/usr/bin/env bash
# Planned H200 calls (device tool), by phase; each step logs under $OUT and a failing step does
# not stop the next ones.
#   final: fp8 check, quick benchmark of three workloads with the profile, GPU tests (~6 min)
#   train: 125M bf16 vs mxfp8 for a few hundred steps, comparison report (~8 min)
#   bench: the full benchmark of DESIGN.md section 7 with the accuracy table (FLAMIA_AUTOTUNE=8x3,4x3:
#          about 5 minutes, 2026-12-03), then GPU tests of the triton kernels and the API
#   sweep / mini: MXFP8 config sweep (bench/fp8_sweep.sh) and the token-major copy check
#   last: GPU tests on the final tree and a quick benchmark of it (~9 min)
#   dq: the BF16 dQ modes (FLAMIA_DQ=separate|fused): GPU tests and a quick benchmark
#   gluon: the Gluon BF16 forward and dQ (FLAMIA_FWD_KERNEL, FLAMIA_DQ_KERNEL): GPU tests, quick benchmark
#   dkdv: the Gluon dK/dV kernel: Hopper GPU tests, then its pipeline and fused-dQ variants
#         against the triton kernel (bench/gluon_variants.py --kernel dkdv) (~5 min)
#   dkdvws: the warp-specialized Gluon dK/dV kernel (FLAMIA_GLUON_DKDV=S,0,ws): variants, Hopper GPU
#           tests, quick benchmark with it
#   fwd8: the Gluon FP8 forward: FP8 GPU tests, triton vs Gluon FP8 forward, quick mxfp8 benchmark
#   dkdv8: written 2026-12-05 without a GPU: the Gluon FP8 dK/dV kernel and the BF16 dK/dV
#          kernel's lse2/delta by TMA (FLAMIA_GLUON_DKDV_LSE=tma): GPU tests first (a hang ends
#          at the step's timeout), then triton split / fused vs Gluon FP8 dK/dV with 2 and 3 ring
#          slots and the in-flight schedule, and the BF16 kernel with and without TMA (~8 min)
#   bench8: quick benchmark in one process, bf16 with and without FLAMIA_GLUON_DKDV_LSE=tma, mxfp8
#           with and without the Gluon FP8 dK/dV kernel (~5 min)
#   doc: written 2026-12-05 (second CPU-only session): doc tiles (FLAMIA_TILES=doc) in the BF16
#        kernels: GPU tests (FA rule, probes, Gluon vs triton, WS vs plain), then a quick
#        benchmark in one process, bf16 on grid and doc tiles, the cuDNN baselines (~7 min)
#   tests2 / bench2: the GPU tests of doc, dkdv8 in one call; one benchmark of all their providers
#   host: host time per layer of a BF16 call (bench/host_layers.py), with cProfile
#   dqws: the warp-specialized Gluon dQ kernel (FLAMIA_GLUON_DQ=ws): variants, GPU tests, benchmark
#   ws: the warp-specialized Gluon forward (FLAMIA_GLUON_FWD=...,ws): forward variants, Hopper GPU tests
#   profile: Nsight Compute (ncu) on the bf16 and mxfp8 kernels, stall reasons per SASS line
#   persist: written 2026-12-05 (fourth session): the persistent Gluon forward and dQ kernels
#            (FLAMIA_GLUON_FWD=...,persistent, FLAMIA_GLUON_DQ=persistent): GPU tests, dQ alone
#            against the warp-specialized one, quick benchmark with both (~8 min)
#   order: the grouped launch order (FLAMIA_ORDER) vs LPT: GPU tests, quick benchmark, ncu bytes
#   shortdocs: Nsight Compute on U(32, 1024) and one document, every kernel of flamia-bf16 and
#            of cudnn-thd in one report (cuDNN's launch grid, registers, stalls) (~8 min)
#   queue: written 2026-12-05 (sixth session, no GPU): the persistent kernels with a work queue:
#          GPU tests, each kernel alone, quick benchmark (~8 min)
#   gputests: the whole GPU tier, four pytest processes side by side (~9 min)
#   short: the short-document forward picked from max_seqlen: GPU tests, quick benchmark (~6 min)
# Run on 2026-12-06 (H200): the former 'next' phase (GPU tests of the own-rows, work-queue and
# pair-step kernels, 54 passed; one quick benchmark of their providers), then the full grid; the
# own-rows and FP8 forward pair-step modes were no faster and are removed (bench/PERFORMANCE_LOG.md).
#   grid: the full grid (~7.5 min with the timing rounds), then the short-document forward's GPU tests
#   timeline: kernel timelines of the persistent forward after 3 and 300 calls, with clocks
#   d64: the D = 64 forward with 3 and 4 ring slots (ws and persistent): GPU tests, variants
#   default: the persistent forward as the default: BF16 Gluon + API GPU tests, U(32, 1024) with
#            and without clock sampling, the full grid (timed in alternating rounds) (~9 min)
#   dkdvp: the persistent dK/dV kernel (opt-in): GPU tests, three workloads
#   dqdefault: the persistent dQ kernel (with delta) as the default: GPU tests, the grid
#   delta: written 2026-12-06 (eleventh session) before its GPU run: delta computed in the Gluon
#          dQ kernel (FLAMIA_DELTA=dq): its GPU tests (delta and gradients bit for bit against
#          the delta kernel, every dQ mode, doc tiles; the dQ modes, leaks, fused dQ, FA rule),
#          then five workloads in 6 alternating rounds against FLAMIA_DELTA=kernel and the
#          persistent dQ kernel, which loads the next tile's O with its Q and dO (~8 min)
# Run 2026-12-06 (ninth session, H100s only): short (tests pass, quick bench), grid (full grid at
# 3598fad), the D = 64 forward variants and a timeline (bench/PERFORMANCE_LOG.md).
# Run 2026-12-06 (tenth session, H100s only): timeline and d64 (bench/PERFORMANCE_LOG.md: the GPU
# slows as it heats, hence the alternating rounds of bench.attention), default (its GPU tests
# pass; its grid ran past the step's 330 s, so grid now gives the grid 450 s and runs first).
# Run 2026-12-06 (eleventh session, H100s only): grid (0856, the tenth session's tree), delta
# (twice), dqdefault (GPU tests + grid without nvfp4_fp8 and accuracy), dkdvp, dkdvbench,
# dkdvdefault (bench/PERFORMANCE_LOG.md).
# Run 2026-12-06 (twelfth session, H100s only): grid (1130, the full grid of c3816e4: persistent
# dQ with delta and persistent dK/dV as the defaults) and hostgap (bench/PERFORMANCE_LOG.md); then no
# device could be started, so final12 (written for the final tree) has not run.
# Next session: bash bench/h200_session.sh final12 (the host-path changes' GPU tests), then grid
# on an H200 if one is lent (no H200 has run the persistent kernels, the short-document forward
# or the alternating rounds yet).
# Run 2026-12-06 (thirteenth session, H100s only): launch (twice: the first found the cached
# launch never taken; fixed, then its GPU tests passed and it was timed); bf16grid written but
# not run (no device could be started). Next session: grid on the final tree (the cached launch
# as the default), on an H200 if one is lent; hostab (the launch A/B in one process).
# Run 2026-12-06 (fourteenth session, H100s only, after six tries got no machine): grid (the
# final tree: the cached launch as the default), hostab, bf16grid, gputests (bench/PERFORMANCE_LOG.md).
# Next session: grid on an H200 if one is lent (~6 min on an H100; none has run the persistent
# kernels or the cached launch), then python -m bench.summary on its JSON, --against the 16:51
# H100 grid only with --any-gpu (different cards).
# Run 2026-12-06 (fifteenth session, H100s only, after three tries got none): prep (the FP8 dQ
# prologue against the prologue kernel: no faster, reverted; the phase is gone with it), then
# final15 (the grid with the Gluon FP8 dK/dV kernel as the default; its tests ran out of the
# step's 100 s while compiling and passed in a second call); dkdv8default was written but not
# run (final15 took its place after failed starts). Next session: grid on an H200 if
# one is lent, then python -m bench.summary on its JSON.
# Run 2026-12-06 (sixteenth session, H100 after sixteen calls got no machine): rowwise16 with
# TIER_S=220 BENCH_S=170 ROUNDS=3 DISTS="u32_1024 one_doc" (tests pass; fp8_rowwise 0.7-0.9%
# slower than mxfp8), then the BF16 Hopper and API/launch tests on the warm machine. Next
# session: grid on an H200 if one is lent (none has run since the morning of 2026-12-06).
# 2026-12-07 (seventeenth session): no machine could be started (about twenty calls): grid17,
# inreg17 and quick17 are written and have not run. Next session: grid17 on an H200 (or an
# H100), then inreg17 on the warm machine.
# Run 2026-12-07 (eighteenth session, an H100 after seventeen calls got no machine): inreg17
# (64 s), then tests/test_kernels_fp8.py and tests/test_kernels_hopper.py -k "fp8 or switch" (no
# failure; cut by the time limit) and flamia.report --impl triton --seeds 0-7 on the warm machine.
# Next session: grid17 on an H200 if one is lent.
# 2026-12-07 (nineteenth session): no H200 or H100 could be started from 05:20 to 06:44 (eight
# failed starts); at 06:46 an H100 ran the ten Hopper FP8 tests the eighteenth session had not
# reached (all passed). grid17 has still not run. Next session: grid17 on an H200 if one is lent,
# then python -m bench.target_bound on its JSON.
# Run 2026-12-07 (twentieth session): grid17 on an H100 (asked for an H200; 338 s, tree c97310c).
# Next session: grid17 on an H200 if one is lent.
# Run 2026-12-07 (twenty-first session): grid17 on an H100 again (asked for an H200; 350 s, tree
# 041d282), and after mxfp8's dK/dV kernel went in flight, on tree 607f80a (350 s). Next
# session: grid17 on an H200 if one is lent.
# 2026-12-07 (twenty-second session): no machine could be started (about nineteen calls); pt22
# is written and has not run. Next session: pt22, then grid17 on an H200 if one is lent.
# 2026-12-07 (twenty-third session): pt22 ran on an H100 (15:01; its 200 s test tier was cut
# off, the same tests then passed in a call of their own, 263 s); h200q written for an H200 and
# not run (no machine came). Next session: h200q or grid17 on an H200 if one is lent.
# 2026-12-07 (twenty-fourth session): grid17 on an H200 at 18:40 (BENCH_S=430 TIER_S=40; 403 s;
# the seeds step printed its summary and was cut off at 40 s before writing its JSON). h200q has
# still not run (the grid covers it).
# 2026-12-07 (twenty-fifth session): quant25 on an H100 at 21:29 (without .whl: no cuDNN THD; its
# Hopper FP8 tier cut at 300 s after 29 of 32 passed); quant25b written, not run (four failed
# starts); bench.quantizer again on an H100 at 22:22 as a direct command. Next session: quant25b
# on an H200, then grid17.
# 2026-12-08 (twenty-sixth session): persist26 written (the persistent FP8 dK/dV kernel), not
# run: no machine came, then none was lent. Next session: persist26 (any Hopper GPU: it compares
# in one process); if the persistent kernel is faster, make it the default (DKDV8_PERSISTENT)
# and run grid17 on an H200; quant25b is still pending too.
# Measured 2026-12-03: final, sweep, bench, last, profile (Nsight Compute works on this
# machine: --clock-control none). The full grid of 14:04 ran as a one-off command with
# FLAMIA_AUTOTUNE=8x3,4x3 (bench/PERFORMANCE_LOG.md); it takes about 5 minutes.
#
# Prepare here (CPU machine), once:
#   ../shared/device/wheels.sh               # torchtitan + deps as wheels in .whl/
#   FLAMIA_CACHE=$PWD/.cache/flamia python -m data.report --corpus python-docs   # tokenizer+shards
#   then move .cache/flamia/debian away (the shards suffice; the carry limit is 64 MiB)
# Run (device tool): command "bash bench/h200_session.sh <phase>", carry [".whl", ".cache"].
set -u
phase=${1:-final}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 FLAMIA_CACHE=$PWD/.cache/flamia
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee $OUT/gpu.txt
step() { local t0=$SECONDS; echo "== $1"; shift; timeout "$@"; echo "rc=$? $((SECONDS - t0))s"; }
# tier NAME SECONDS PYTEST_ARGS..: a part of the GPU tests in the background (run several, then
# wait, then tier_report): pytest processes side by side on the one GPU, since compiling the
# kernels (one process: minutes) is most of their time and the machine has 16 cores.
tier() {
  local name=$1 limit=$2
  shift 2
  FLAMIA_AUTOTUNE=0 timeout $limit python -m pytest -q -p no:cacheprovider "$@" \
    > $OUT/gpu_tests_$name.log 2>&1
  echo "$name rc=$?" >> $OUT/gpu_tests_rc.txt
}
# The short-document forward's own GPU tests (its bits, FA rule, probes at D = 64 and 128; the
# 64-wide persistent forward against the plain one) and its leak-test row, in the background.
short_tiers() {
  tier short $1 tests/test_kernels_hopper.py -k "short_documents or 64-persistent" &
  tier leaks $1 tests/test_kernels_hopper.py -k "gluon_kernels_do_not_leak and 64" &
}
tier_report() {
  for log in $OUT/gpu_tests_*.log; do
    echo "== $log"
    grep -E "passed|failed|FAILED|Error" $log | tail -8
  done
  cat $OUT/gpu_tests_rc.txt
}
# A variant of the Gluon BF16 forward and dQ kernels: the GPU tests selected by $1 (a hang ends
# at the step's timeout), the forward (FLAMIA_GLUON_FWD=128,128,8,2,$2) and the dQ kernel
# (FLAMIA_GLUON_DQ=$3) alone against the warp-specialized ones, then a quick benchmark in one
# process of flamia-bf16, the providers named after them and cuDNN THD.
gluon_variants() {
  local tests=$1 fwd=$2 dq=$3
  shift 3
  FLAMIA_AUTOTUNE=0 step "gpu tests" 200 python -m pytest -q -p no:cacheprovider \
    tests/test_kernels_hopper.py -k "$tests" > $OUT/gpu_tests.log 2>&1
  grep -E "passed|failed|FAILED|Error" $OUT/gpu_tests.log | tail -12
  FLAMIA_AUTOTUNE=8x3,4x3 step "fwd variants" 70 python -m bench.gluon_variants \
    --configs 128,128,8,2,ws 128,128,8,2,$fwd > $OUT/fwd_variants.txt 2>&1
  grep -vE "Warn|warn" $OUT/fwd_variants.txt | tail -10
  FLAMIA_AUTOTUNE=8x3,4x3 step "dq variants" 70 python -m bench.gluon_variants --kernel dq \
    --configs ws $dq > $OUT/dq_variants.txt 2>&1
  grep -vE "Warn|warn" $OUT/dq_variants.txt | tail -10
  FLAMIA_AUTOTUNE=8x3,4x3 step "bench" 200 python -m bench.attention --quick --profile --dists \
    u32_1024 u128_4096 lognormal_1k equal_2k one_doc --providers flamia-bf16 "$@" cudnn-thd \
    --out $OUT > $OUT/bench.log 2>&1
  grep -E "^\| |^- .*_attn_|^###" $OUT/bench.log | grep -v "^| ---" | tail -40
}
case $phase in
checktrain)  # fp8 check + GPU tests + a 200-step 125M comparison, within one 600 s call
  FLAMIA_AUTOTUNE=0 step "fp8 check" 130 python -m bench.fp8_check 2>&1 | tee $OUT/fp8_check.log
  FLAMIA_AUTOTUNE=0 step "gpu tests" 130 python -m pytest -q -p no:cacheprovider \
    tests/test_kernels_fp8.py tests/test_kernels.py tests/test_api.py > $OUT/gpu_tests.log 2>&1
  grep -E "passed|failed|FAILED|Error" $OUT/gpu_tests.log | tail -12
  bash $0 train 200 140
  ;;
train)
  steps=${2:-300}
  for v in bf16 mxfp8; do
    step "train 125M $v" ${3:-240} torchrun --nproc_per_node=1 -m train \
      --job.config_file configs/llama3_125m_$v.toml --training.steps $steps \
      --job.dump_folder $OUT/run_$v --checkpoint.no-enable > $OUT/train_$v.log 2>&1
    grep -E "step: *[0-9]+ " $OUT/train_$v.log | tail -3
  done
  python -m train.compare $OUT/run_bf16 $OUT/run_mxfp8 --out $OUT/compare.png || true
  ;;
final)  # fp8 check, quick benchmark with FP8 providers and profile, GPU tests (one 600 s call)
  FLAMIA_AUTOTUNE=0 step "fp8 check" 130 python -m bench.fp8_check 2>&1 | tee $OUT/fp8_check.log
  FLAMIA_AUTOTUNE=8x3,4x3,4x2 step "bench" 280 python -m bench.attention --quick --profile \
    --dists one_doc lognormal_1k u32_1024 --out $OUT > $OUT/bench.log 2>&1
  grep -v Warn $OUT/bench.log | tail -45
  FLAMIA_AUTOTUNE=0 step "gpu tests" 110 python -m pytest -q -p no:cacheprovider \
    tests/test_kernels_fp8.py tests/test_kernels.py > $OUT/gpu_tests.log 2>&1
  grep -E "passed|failed|FAILED|Error" $OUT/gpu_tests.log | tail -12
  ;;
sweep)  # transpose modes, FP8 GPU tests, MXFP8 config sweep (bench/fp8_sweep.sh), ~8 min
  step "transpose check" 40 python -m bench.transpose_check 2>&1 | tee $OUT/transpose_check.log
  FLAMIA_AUTOTUNE=0 step "gpu tests" 150 python -m pytest -q \
    -p no:cacheprovider tests/test_kernels_fp8.py > $OUT/gpu_tests.log 2>&1
  grep -E "passed|failed|FAILED|Error" $OUT/gpu_tests.log | tail -12
  FLAMIA_SWEEP=${FLAMIA_SWEEP:-"w8s2 bwd64x64_w8s2 small_w4s2 w4s2 w8s3"} bench/fp8_sweep.sh /tmp/sweep 2>&1 \
    | tee $OUT/fp8_sweep.log
  tar czf $OUT/fp8_sweep_results.tgz -C /tmp sweep  # one file: the device returns 8 at most
  ;;
mini)  # what fits in ~150 s: transpose check and three MXFP8 settings
  step "transpose check" 30 python -m bench.transpose_check 2>&1 | tee $OUT/transpose_check.log
  FLAMIA_SWEEP="w4s2 bwd64x64_w8s2 bwd64x64_w4s2" bench/fp8_sweep.sh $OUT 2>&1 | tee $OUT/fp8_sweep.log
  ;;
last)  # GPU tiers on the final tree and a quick benchmark of it (~9 min; the Gluon tests alone
      # took 135-160 s on 2026-12-04)
  FLAMIA_AUTOTUNE=0 step "gpu tests" 300 python -m pytest -q -x -p no:cacheprovider \
    tests/test_kernels_fp8.py tests/test_kernels.py tests/test_kernels_hopper.py tests/test_api.py > $OUT/gpu_tests.log 2>&1
  grep -E "passed|failed|FAILED|Error" $OUT/gpu_tests.log | tail -12
  FLAMIA_AUTOTUNE=8x3,4x3 step "bench" 240 python -m bench.attention --quick --profile --dists \
    lognormal_1k one_doc u32_1024 --providers flamia-bf16 flamia-mxfp8 cudnn-thd cudnn-dense \
    --out $OUT > $OUT/bench.log 2>&1
  grep -E "^\| |^- .*(_attn_|_quantize|_token_major)|^###" $OUT/bench.log | tail -40
  ;;
profile)  # Nsight Compute on flamia's bf16 and mxfp8 kernels: stall reasons, pipes, top stalls
  ncu_bin=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)
  FLAMIA_AUTOTUNE=8x3 step "ncu" 240 $ncu_bin --profile-from-start off --clock-control none \
    --kernel-name regex:'_attn_(fwd|bwd_dkdv|bwd_dq)' --section SpeedOfLight \
    --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
    --section Occupancy --section LaunchStats --section SourceCounters \
    --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,regex:sm__inst_executed_pipe_.*\.avg\.pct_of_peak_sustained_active' \
    --export /tmp/attn --force-overwrite python -m bench.ncu_attention --recipes bf16 mxfp8 \
    > $OUT/ncu.txt 2>&1
  tail -12 $OUT/ncu.txt  # with --export ncu prints only its progress; the report is read below
  mkdir -p /tmp/ncu_src
  PATH=$(dirname $ncu_bin):$PATH step "stalls" 120 python -m bench.ncu_attention \
    --stalls /tmp/attn.ncu-rep --raw-dir /tmp/ncu_src > $OUT/stalls.txt 2>&1
  tar czf $OUT/ncu_source.tgz -C /tmp ncu_src
  head -c 5000 $OUT/stalls.txt
  ;;
shortdocs)  # Nsight Compute on U(32, 1024), where flamia-bf16's forward takes 0.45-0.49 ms to
           # cuDNN THD's 0.30: every kernel of one fwd+bwd of flamia-bf16 and of cudnn-thd
           # (cuDNN's launch grid, registers and stalls beside flamia's), then one document's
  ncu_bin=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)
  for dist in u32_1024 one_doc; do
    FLAMIA_AUTOTUNE=8x3 step "ncu $dist" 200 $ncu_bin --profile-from-start off \
      --clock-control none --section SpeedOfLight --section WarpStateStats \
      --section SchedulerStats --section Occupancy --section LaunchStats \
      --section SourceCounters --export /tmp/short_$dist --force-overwrite \
      python -m bench.ncu_attention --providers flamia-bf16 cudnn-thd --dist $dist \
      > $OUT/ncu_$dist.txt 2>&1
    tail -4 $OUT/ncu_$dist.txt
    $ncu_bin --import /tmp/short_$dist.ncu-rep --page details --section LaunchStats \
      --section SpeedOfLight > $OUT/ncu_${dist}_details.txt 2>&1
    grep -E "^  [a-zA-Z_]|Duration|Grid Size|Registers Per|Compute \(SM\) Throughput" \
      $OUT/ncu_${dist}_details.txt | head -60
    PATH=$(dirname $ncu_bin):$PATH step "stalls $dist" 100 python -m bench.ncu_attention \
      --stalls /tmp/short_$dist.ncu-rep > $OUT/stalls_$dist.txt 2>&1
  done
  ;;
dq)  # BF16 dQ modes (FLAMIA_DQ): GPU tests of both, then a quick benchmark of both (~6 min)
  FLAMIA_AUTOTUNE=0 step "gpu tests" 200 python -m pytest -q -p no:cacheprovider \
    tests/test_kernels.py tests/test_api.py > $OUT/gpu_tests.log 2>&1
  grep -E "passed|failed|FAILED|Error" $OUT/gpu_tests.log | tail -12
  FLAMIA_AUTOTUNE=8x3,4x3 step "bench" 240 python -m bench.attention --quick --profile --dists \
    lognormal_1k one_doc u32_1024 --providers flamia-bf16 "flamia-bf16 (fused dQ)" cudnn-thd \
    cudnn-dense --out $OUT > $OUT/bench.log 2>&1
  grep -E "^\| |^- .*(_attn_|_quantize|_token_major)|^###|Error" $OUT/bench.log | tail -40
  ;;
gluon)  # the Gluon BF16 kernels (default on Hopper): GPU tests, then a quick benchmark
  FLAMIA_AUTOTUNE=0 step "gpu tests" 240 python -m pytest -q -p no:cacheprovider \
    tests/test_kernels_hopper.py tests/test_kernels.py tests/test_api.py > $OUT/gpu_tests.log 2>&1
  grep -E "passed|failed|FAILED|Error" $OUT/gpu_tests.log | tail -12
  FLAMIA_AUTOTUNE=8x3,4x3 step "bench" 240 python -m bench.attention --quick --profile --dists \
    lognormal_1k one_doc u32_1024 --providers flamia-bf16 "flamia-bf16 (triton kernels)" cudnn-thd \
    cudnn-dense --out $OUT > $OUT/bench.log 2>&1
  grep -E "^\| |^- .*(_attn_|_quantize|_token_major)|^###|Error" $OUT/bench.log | tail -40
  ;;
ws)  # the warp-specialized Gluon forward: forward variants first (a hang ends at its timeout),
     # then the GPU tests of the Gluon kernels, then a quick fwd+bwd benchmark with it
  FLAMIA_AUTOTUNE=8x3,4x3 step "fwd variants" 150 python -m bench.gluon_variants \
    --configs ${FWD_CONFIGS:-128,128,8,2 128,128,8,2,ws 128,128,8,2,pingpong 128,128,8,3,pingpong} > $OUT/fwd_variants.txt 2>&1
  grep -vE "Warn|warn" $OUT/fwd_variants.txt | tail -14
  FLAMIA_AUTOTUNE=0 step "gpu tests" 200 python -m pytest -q -p no:cacheprovider \
    tests/test_kernels_hopper.py > $OUT/gpu_tests.log 2>&1
  grep -E "passed|failed|FAILED|Error" $OUT/gpu_tests.log | tail -12
  FLAMIA_GLUON_FWD=${WS_BENCH:-128,128,8,2,pingpong} FLAMIA_AUTOTUNE=8x3,4x3 step "bench" 240 \
    python -m bench.attention --quick --profile --dists lognormal_1k one_doc u32_1024 \
    --providers flamia-bf16 cudnn-thd cudnn-dense --out $OUT > $OUT/bench.log 2>&1
  grep -E "^\| |^- .*_attn_|^###|Error" $OUT/bench.log | tail -30
  ;;
dkdvws)  # the warp-specialized Gluon dK/dV kernel: its variants first (a hang ends at its
         # timeout), the GPU tests of the Gluon kernels, a quick benchmark with it
  FLAMIA_AUTOTUNE=8x3,4x3 step "dkdv variants" 150 python -m bench.gluon_variants --kernel dkdv \
    --configs ${DKDV_CONFIGS:-2,0 2,0,ws 3,0,ws} > $OUT/dkdv_variants.txt 2>&1
  grep -vE "Warn|warn" $OUT/dkdv_variants.txt | tail -14
  FLAMIA_AUTOTUNE=0 step "gpu tests" 200 python -m pytest -q -p no:cacheprovider \
    tests/test_kernels_hopper.py > $OUT/gpu_tests.log 2>&1
  grep -E "passed|failed|FAILED|Error" $OUT/gpu_tests.log | tail -12
  FLAMIA_DKDV_KERNEL=gluon FLAMIA_GLUON_DKDV=${WS_BENCH:-2,0,ws} FLAMIA_AUTOTUNE=8x3,4x3 \
    step "bench" 200 python -m bench.attention --quick --profile --dists lognormal_1k one_doc \
    u32_1024 --providers flamia-bf16 cudnn-thd cudnn-dense --out $OUT > $OUT/bench.log 2>&1
  grep -E "^\| |^- .*_attn_|^###|Error" $OUT/bench.log | tail -30
  ;;
fwd8)  # the Gluon FP8 forward: its GPU tests and the FP8 tests (auto runs it), the FP8 forward
      # alone (triton vs Gluon), then the rest of the Hopper tests and a quick mxfp8 benchmark
  FLAMIA_AUTOTUNE=0 step "fp8 gpu tests" 200 python -m pytest -q -p no:cacheprovider -k fp8 \
    tests/test_kernels_hopper.py tests/test_kernels_fp8.py > $OUT/gpu_tests_fp8.log 2>&1
  grep -E "passed|failed|FAILED|Error" $OUT/gpu_tests_fp8.log | tail -12
  FLAMIA_AUTOTUNE=8x3,4x3 step "fwd8 variants" 120 python -m bench.gluon_variants --kernel fwd8 \
    --configs mxfp8 nvfp4_fp8 > $OUT/fwd8_variants.txt 2>&1
  grep -vE "Warn|warn" $OUT/fwd8_variants.txt | tail -14
  FLAMIA_AUTOTUNE=8x3,4x3 step "bench" ${BENCH_S:-150} python -m bench.attention --quick --profile \
    --dists lognormal_1k one_doc --providers flamia-bf16 flamia-mxfp8 cudnn-thd cudnn-dense \
    --out $OUT > $OUT/bench.log 2>&1
  grep -E "^\| |^- .*(_attn_|quant)|^###|Error" $OUT/bench.log | tail -30
  ;;
dkdv8)  # the Gluon FP8 dK/dV kernel and the BF16 dK/dV kernel's lse2/delta by TMA: their GPU
        # tests (bitwise against the default kernels, probes, refusals), then each kernel alone
  FLAMIA_AUTOTUNE=0 step "dkdv8 gpu tests" 240 python -m pytest -q -p no:cacheprovider \
    -k "fp8_dkdv or fp8_kernels or dkdv8 or lse or leak" tests/test_kernels_hopper.py \
    > $OUT/gpu_tests_dkdv8.log 2>&1
  grep -E "passed|failed|FAILED|Error" $OUT/gpu_tests_dkdv8.log | tail -12
  FLAMIA_AUTOTUNE=8x3,4x3 step "dkdv8 variants" 150 python -m bench.gluon_variants --kernel dkdv8 \
    --configs ${DKDV8_CONFIGS:-mxfp8:2:3:3,pipe nvfp4_fp8} > $OUT/dkdv8_variants.txt 2>&1
  grep -vE "Warn|warn" $OUT/dkdv8_variants.txt | tail -14
  FLAMIA_AUTOTUNE=8x3,4x3 step "dkdv lse variants" 120 python -m bench.gluon_variants --kernel dkdv \
    --configs 2,0,ws 2,0,ws,tma 3,0,ws,tma > $OUT/dkdv_lse_variants.txt 2>&1
  grep -vE "Warn|warn" $OUT/dkdv_lse_variants.txt | tail -14
  ;;
bench8)  # quick benchmark, one process: bf16 with and without its dK/dV kernel's lse2/delta by
         # TMA, mxfp8 with the triton and the Gluon FP8 dK/dV kernels, the cuDNN baselines
  FLAMIA_AUTOTUNE=8x3,4x3 step "bench" ${BENCH_S:-280} python -m bench.attention --quick \
    --profile --dists lognormal_1k one_doc u32_1024 --providers flamia-bf16 \
    "flamia-bf16 (dK/dV lse by loads)" flamia-mxfp8 "flamia-mxfp8 (Gluon dK/dV)" cudnn-thd \
    cudnn-dense --out $OUT > $OUT/bench.log 2>&1
  grep -E "^\| |^- .*(_attn_|quant)|^###|Error" $OUT/bench.log | tail -40
  ;;
doc)  # doc tiles (FLAMIA_TILES=doc): GPU tests first, then grid vs doc tiles in one process
  FLAMIA_AUTOTUNE=0 step "doc gpu tests" 200 python -m pytest -q -p no:cacheprovider \
    -k "doc or leak or flash_attention_rule" tests/test_kernels_hopper.py tests/test_kernels.py \
    > $OUT/gpu_tests_doc.log 2>&1
  grep -E "passed|failed|FAILED|Error" $OUT/gpu_tests_doc.log | tail -12
  FLAMIA_AUTOTUNE=8x3,4x3 step "bench" ${BENCH_S:-300} python -m bench.attention --quick \
    --profile --dists u32_1024 lognormal_1k one_doc --providers flamia-bf16 \
    "flamia-bf16 (doc tiles)" cudnn-thd cudnn-dense --out $OUT > $OUT/bench.log 2>&1
  grep -E "^\| |^- .*_attn_|^###|Error" $OUT/bench.log | tail -40
  ;;
tests2)  # the GPU tests of everything written without a GPU (doc tiles, Gluon FP8 dK/dV, BF16
        # dK/dV lse2/delta by TMA) in one call, when device time is short (~7 min)
  FLAMIA_AUTOTUNE=0 step "doc gpu tests" 200 python -m pytest -q -p no:cacheprovider \
    -k "doc or leak or flash_attention_rule" tests/test_kernels_hopper.py tests/test_kernels.py \
    > $OUT/gpu_tests_doc.log 2>&1
  grep -E "passed|failed|FAILED|Error" $OUT/gpu_tests_doc.log | tail -12
  FLAMIA_AUTOTUNE=0 step "dkdv8 gpu tests" 240 python -m pytest -q -p no:cacheprovider \
    -k "fp8_dkdv or fp8_kernels or dkdv8 or lse" tests/test_kernels_hopper.py \
    > $OUT/gpu_tests_dkdv8.log 2>&1
  grep -E "passed|failed|FAILED|Error" $OUT/gpu_tests_dkdv8.log | tail -12
  ;;
bench2)  # one quick benchmark process for all of them: bf16 grid / doc tiles / dK/dV lse by TMA,
         # mxfp8 with the triton and the Gluon FP8 dK/dV kernels, the cuDNN baselines (~6 min)
  FLAMIA_AUTOTUNE=8x3,4x3 step "bench" ${BENCH_S:-420} python -m bench.attention --quick \
    --profile --dists u32_1024 lognormal_1k one_doc --providers flamia-bf16 \
    "flamia-bf16 (doc tiles)" "flamia-bf16 (dK/dV lse by loads)" flamia-mxfp8 \
    "flamia-mxfp8 (Gluon dK/dV)" cudnn-thd cudnn-dense --out $OUT > $OUT/bench.log 2>&1
  grep -E "^\| |^- .*(_attn_|quant)|^###|Error" $OUT/bench.log | tail -60
  ;;
lse)  # after the 2026-12-05 H100 calls: lse2/delta by TMA the default, the tests it failed for
     # a test bug (a CPU stand-in pointer), the triton GPU tier cut off by the doc-tile crash,
     # then the quick benchmark of the new default against cuDNN (~5 min)
  FLAMIA_AUTOTUNE=0 step "lse gpu tests" 150 python -m pytest -q -p no:cacheprovider \
    -k "lse_by_tma or do_not_leak" tests/test_kernels_hopper.py > $OUT/gpu_tests_lse.log 2>&1
  grep -E "passed|failed|FAILED|Error" $OUT/gpu_tests_lse.log | tail -12
  FLAMIA_AUTOTUNE=0 step "triton gpu tests" 100 python -m pytest -q -p no:cacheprovider \
    -k "gpu or leak or cover" tests/test_kernels.py > $OUT/gpu_tests_triton.log 2>&1
  grep -E "passed|failed|FAILED|Error" $OUT/gpu_tests_triton.log | tail -12
  FLAMIA_AUTOTUNE=8x3,4x3 step "bench" ${BENCH_S:-170} python -m bench.attention --quick \
    --profile --dists one_doc lognormal_1k u32_1024 --providers flamia-bf16 cudnn-thd \
    cudnn-dense --out $OUT > $OUT/bench.log 2>&1
  grep -E "^\| |^- .*_attn_|^###|Error" $OUT/bench.log | tail -30
  ;;
host)  # host time per layer of a BF16 call (bench/host_layers.py) and its cProfile, ~1 min
  FLAMIA_AUTOTUNE=8x3,4x3 step "host layers" 120 python -m bench.host_layers \
    --dists u32_1024 lognormal_1k --cprofile "flamia fwd" "kernels bwd" > $OUT/host_layers.txt 2>&1
  grep -E "^\| " $OUT/host_layers.txt
  ;;
dqws)  # the warp-specialized Gluon dQ kernel: its variants, the GPU tests of the Gluon kernels,
       # a quick benchmark of the defaults (all three Gluon kernels warp-specialized)
  FLAMIA_AUTOTUNE=8x3,4x3 step "dq variants" 150 python -m bench.gluon_variants --kernel dq \
    --configs plain ws > $OUT/dq_variants.txt 2>&1
  grep -vE "Warn|warn" $OUT/dq_variants.txt | tail -14
  FLAMIA_AUTOTUNE=0 step "gpu tests" 220 python -m pytest -q -p no:cacheprovider \
    tests/test_kernels_hopper.py > $OUT/gpu_tests.log 2>&1
  grep -E "passed|failed|FAILED|Error" $OUT/gpu_tests.log | tail -12
  FLAMIA_AUTOTUNE=8x3,4x3 step "bench" 200 python -m bench.attention --quick --profile --dists \
    lognormal_1k one_doc u32_1024 --providers flamia-bf16 cudnn-thd cudnn-dense --out $OUT \
    > $OUT/bench.log 2>&1
  grep -E "^\| |^- .*_attn_|^###|Error" $OUT/bench.log | tail -30
  ;;
dkdv)  # the Gluon dK/dV kernel: GPU tests of the Gluon kernels, then its variants alone;
       # the fused-dQ variants that once hung (2026-12-04) run last, one workload per process
  FLAMIA_AUTOTUNE=0 step "gpu tests" 150 python -m pytest -q -p no:cacheprovider \
    tests/test_kernels_hopper.py > $OUT/gpu_tests.log 2>&1
  grep -E "passed|failed|FAILED|Error" $OUT/gpu_tests.log | tail -12
  FLAMIA_AUTOTUNE=8x3,4x3 step "variants" 160 python -m bench.gluon_variants --kernel dkdv \
    --configs ${DKDV_CONFIGS:-2,0 triton,fused 2,0,unordered} > $OUT/dkdv_variants.txt 2>&1
  for dist in lognormal_1k u32_1024 one_doc; do
    FLAMIA_AUTOTUNE=8x3,4x3 step "fused $dist" 60 python -m bench.gluon_variants --kernel dkdv \
      --configs 2,0,fused --dists $dist >> $OUT/dkdv_variants.txt 2>&1
  done
  grep -vE "Warn|warn" $OUT/dkdv_variants.txt | tail -30
  ;;
persist)  # written 2026-12-05 (fourth session) without a GPU: the persistent Gluon forward
         # (FLAMIA_GLUON_FWD=128,128,8,2,persistent; measured 16:26 on an H100) and dQ kernel
         # (FLAMIA_GLUON_DQ=persistent; not yet run): GPU tests (same bits as the plain kernels,
         # probes), each kernel alone against the warp-specialized one, a quick benchmark in one
         # process (~8 min)
  FLAMIA_AUTOTUNE=0 step "gpu tests" 170 python -m pytest -q -p no:cacheprovider \
    tests/test_kernels_hopper.py -k "persistent or is_checked or warp_specialized_dq" \
    > $OUT/gpu_tests.log 2>&1
  grep -E "passed|failed|FAILED|Error" $OUT/gpu_tests.log | tail -12
  FLAMIA_AUTOTUNE=8x3,4x3 step "dq variants" 100 python -m bench.gluon_variants --kernel dq \
    --configs ws persistent > $OUT/dq_variants.txt 2>&1
  grep -vE "Warn|warn" $OUT/dq_variants.txt | tail -10
  FLAMIA_AUTOTUNE=8x3,4x3 step "bench" 240 python -m bench.attention --quick --profile --dists \
    u32_1024 lognormal_1k one_doc --providers flamia-bf16 "flamia-bf16 (persistent fwd)" \
    "flamia-bf16 (persistent fwd, dQ)" cudnn-thd cudnn-dense --out $OUT > $OUT/bench.log 2>&1
  grep -E "^\| |^- .*_attn_|^###" $OUT/bench.log | tail -40
  ;;
queue)  # written 2026-12-05 (sixth session) without a GPU: the persistent forward and dQ kernels
       # take their work items from a queue (an atomic counter read by the producer warp and
       # handed to the consumers), no longer dealt in snake order: GPU tests (same bits as the
       # plain kernels with every element written, probes), each kernel alone against the
       # warp-specialized one, a quick benchmark in one process (~8 min)
  gluon_variants "persistent or warp_specialized_dq or do_not_leak" persistent persistent \
    "flamia-bf16 (persistent fwd)" "flamia-bf16 (persistent fwd, dQ)"
  ;;
order)  # written 2026-12-05 (fifth session) after shortdocs found the short-document kernels at
       # 82-86% of DRAM bandwidth: the grouped launch order (FLAMIA_ORDER=grouped, the new
       # default) against LPT (longest): GPU tests, quick benchmark in one process, then Nsight
       # Compute's DRAM bytes and L2 hit rate of both orders on U(32, 1024) (~7 min)
  FLAMIA_AUTOTUNE=0 step "gpu tests" 150 python -m pytest -q -p no:cacheprovider \
    tests/test_kernels.py tests/test_api.py > $OUT/gpu_tests.log 2>&1
  grep -E "passed|failed|FAILED|Error" $OUT/gpu_tests.log | tail -12
  FLAMIA_AUTOTUNE=8x3,4x3 step "bench" 300 python -m bench.attention --quick --profile --dists \
    u32_1024 lognormal_1k equal_2k one_doc --providers flamia-bf16 "flamia-bf16 (LPT order)" \
    "flamia-bf16 (doc tiles)" flamia-mxfp8 "flamia-mxfp8 (LPT order)" cudnn-thd cudnn-dense \
    --out $OUT > $OUT/bench.log 2>&1
  grep -E "^\| |^- .*_attn_|^###" $OUT/bench.log | grep -v "^| ---" | tail -60
  ncu_bin=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)
  FLAMIA_AUTOTUNE=8x3 step "ncu u32_1024" 120 $ncu_bin --profile-from-start off \
    --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis \
    python -m bench.ncu_attention --providers flamia-bf16 "flamia-bf16 (LPT order)" \
    --dist u32_1024 > $OUT/ncu_order.txt 2>&1
  grep -E "^  [a-zA-Z_]|Duration|DRAM Throughput|L2 Hit Rate|Memory Throughput" \
    $OUT/ncu_order.txt | cut -c1-100
  ;;
short)  # 2026-12-06: the short-document forward (64-wide key tiles, persistent, picked from
       # max_seqlen; kernels.attention.fwd_short_docs): GPU tests side by side (its own tests,
       # the 64-wide persistent forward against the plain one, its probes, the ops' checks and
       # the API), then one quick benchmark (at most 150 + 110 s)
  tier_s=${TIER_S:-150}
  short_tiers $tier_s
  tier api $tier_s tests/test_api.py tests/test_kernels.py -k "opcheck or api or eager" &
  tier fp8_ops $tier_s tests/test_kernels_fp8.py -k "eager or opcheck" &
  wait
  tier_report
  FLAMIA_AUTOTUNE=8x3,4x3 step "bench" ${BENCH_S:-110} python -m bench.attention --quick \
    --profile --dists u32_1024 lognormal_1k one_doc --providers flamia-bf16 cudnn-thd \
    --out $OUT > $OUT/bench.log 2>&1
  grep -E "^\| " $OUT/bench.log | grep -v "^| ---" | cut -d"|" -f2,6-9,13
  ;;
grid)  # 2026-12-06: the full grid with the accuracy table (~216 s on the H200 before the timing
      # rounds; 330 s on an H100 reached the last workload with them), then the short-document
      # forward's GPU tests (D = 64 and 128)
  FLAMIA_AUTOTUNE=8x3,4x3 step "bench" ${BENCH_S:-450} python -m bench.attention --accuracy \
    --profile --out $OUT > $OUT/bench.log 2>&1
  grep -E "^\| |^(mxfp8|nvfp4|bf16|fp8)|Error" $OUT/bench.log | grep -v "^| ---" | tail -70 \
    | cut -d"|" -f2-7,9,13,15,16
  short_tiers ${TIER_S:-100}
  wait
  tier_report
  ;;
quant25)  # 2026-12-07 (twenty-fifth session): the NVFP4 quantizer rounding in fp32 (magic-number
         # RNE) with 8 warps: its GPU tests (the FP8 tier and the Hopper FP8 rows side by side),
         # then bench.quantizer against the session's first tree's quantizer, which the command
         # writes first (git show 2ccf425:flamia/kernels/quantize.py > .baseline_quantize.py),
         # then fwd+bwd of both FP8 recipes on two workloads against cuDNN (~7 min)
  tier fp8 ${TIER_S:-300} tests/test_kernels_fp8.py &
  tier hopper_fp8 ${TIER_S:-300} tests/test_kernels_hopper.py -k "fp8 or switch" &
  wait
  tier_report
  step "quantizer" 90 python -m bench.quantizer --baseline .baseline_quantize.py \
    --out $OUT/quantizer.txt > $OUT/quantizer.log 2>&1
  tail -12 $OUT/quantizer.log
  FLAMIA_AUTOTUNE=8x3,4x3 step "bench" ${BENCH_S:-200} python -m bench.attention --quick \
    --profile --rounds 3 --dists ${DISTS:-u32_1024 one_doc} --providers flamia-mxfp8 \
    "flamia-nvfp4_fp8 (emulated NVFP4)" cudnn-thd cudnn-dense --out $OUT > $OUT/bench.log 2>&1
  grep -E "^\| |^- .*quantize|Error" $OUT/bench.log | grep -v "^| ---" | tail -30
  ;;
quant25b)  # 2026-12-07 (twenty-fifth session), after quant25 ran on an H100 without .whl (no cuDNN
          # THD) and its Hopper FP8 tier was cut off at 300 s beside the FP8 tier: the quantizer
          # table again, both FP8 recipes on three workloads against cuDNN, then that tier alone
  step "quantizer" 90 python -m bench.quantizer --baseline .baseline_quantize.py \
    --out $OUT/quantizer.txt > $OUT/quantizer.log 2>&1
  tail -10 $OUT/quantizer.log
  FLAMIA_AUTOTUNE=8x3,4x3 step "bench" ${BENCH_S:-200} python -m bench.attention --quick \
    --profile --rounds 3 --dists ${DISTS:-u32_1024 lognormal_1k one_doc} --providers \
    flamia-mxfp8 "flamia-nvfp4_fp8 (emulated NVFP4)" cudnn-thd cudnn-dense --out $OUT \
    > $OUT/bench.log 2>&1
  grep -E "^\| |^- .*quantize|Error" $OUT/bench.log | grep -v "^| ---" | cut -d"|" -f2,6,9,13 \
    | tail -30
  tier hopper_fp8 ${TIER_S:-280} tests/test_kernels_hopper.py -k "${HOPPER_K:-fp8 or switch}"
  tier_report
  ;;
grid17)  # 2026-12-07 (seventeenth session): the full grid (as grid), then the accuracy checks of
        # the kernels over seeds 0-7 (flamia.report --seeds: each seed must pass; exits 1 if one
        # does not, which the CPU reference run says it will on outlier inputs) (~9.5 min)
  FLAMIA_AUTOTUNE=8x3,4x3 step "bench" ${BENCH_S:-430} python -m bench.attention --accuracy \
    --profile --out $OUT > $OUT/bench.log 2>&1
  grep -E "^\| |^(mxfp8|nvfp4|bf16|fp8)|Error" $OUT/bench.log | grep -v "^| ---" | tail -70 \
    | cut -d"|" -f2-7,9,13,15,16
  # how far the 1.3x target is on this GPU (nineteenth session; CPU arithmetic on the JSON)
  python -m bench.target_bound $(ls $OUT/attention_*.json | head -1) > $OUT/target_bound.txt 2>&1
  tail -12 $OUT/target_bound.txt | cut -d"|" -f2,5,6,8,9
  FLAMIA_AUTOTUNE=0 step "accuracy seeds" ${TIER_S:-120} python -m flamia.report --impl triton \
    --seeds 0-7 --json $OUT/accuracy_seeds.json > $OUT/accuracy_seeds.txt 2>&1
  grep -E "FAIL|failed|passed|Error" $OUT/accuracy_seeds.txt | tail -12
  ;;
h200q)  # 2026-12-07 (twenty-third session, ~600 s of device time left): on an H200 only (no H200
       # has timed the current kernels; on another GPU it stops at once), three workloads of
       # the grid with the BF16 and MXFP8 providers against cuDNN, kernel profile, target_bound
       # (~4 min)
  if ! grep -q H200 $OUT/gpu.txt; then echo "not an H200: nothing run"; exit 0; fi
  FLAMIA_AUTOTUNE=8x3,4x3 step "bench h200" ${BENCH_S:-300} python -m bench.attention --quick \
    --profile --rounds 3 --dists ${DISTS:-u32_1024 lognormal_1k one_doc} --providers flamia-bf16 \
    flamia-mxfp8 cudnn-thd cudnn-dense --out $OUT > $OUT/bench_h200.log 2>&1
  grep -E "^\| |Error" $OUT/bench_h200.log | grep -v "^| ---" | tail -12
  python -m bench.target_bound $(ls $OUT/attention_*.json | head -1) > $OUT/target_bound.txt 2>&1
  tail -4 $OUT/target_bound.txt | cut -d"|" -f2,5,6,8,9
  ;;
persist26)  # 2026-12-08 (twenty-sixth session): the persistent FP8 dK/dV kernel
           # (FLAMIA_GLUON_DKDV8=...,persistent) against the plain one: the dK/dV kernel alone,
           # each setting twice in turn (dQ, dK, dV checked bit for bit against the triton split
           # kernels'), fwd+bwd of both recipes with and without it against cuDNN, then its
           # GPU tests (bits against the plain kernel, probes) (~8 min). First a smoke check
           # (one small backward with each kernel, bits compared): on a failure or a hang the
           # call ends there.
  FLAMIA_AUTOTUNE=0 step "smoke" 90 python -m pytest -q -p no:cacheprovider -x \
    tests/test_kernels_hopper.py -k "persistent_is_the_plain and lengths0 and mxfp8" \
    > $OUT/smoke.log 2>&1
  tail -3 $OUT/smoke.log
  grep -q "1 passed" $OUT/smoke.log || exit 1
  FLAMIA_AUTOTUNE=0 step "dkdv8 variants" ${VARIANTS_S:-130} python -m bench.gluon_variants \
    --kernel dkdv8 --configs mxfp8:3,pipe:persistent:3,pipe:persistent nvfp4_fp8:2:persistent \
    --dists ${VARIANT_DISTS:-u32_1024 lognormal_1k one_doc u1024_8192} \
    > $OUT/dkdv8_variants.txt 2>&1
  grep "gluon" $OUT/dkdv8_variants.txt | cut -d"|" -f2-6
  FLAMIA_AUTOTUNE=8x3,4x3 step "bench" ${BENCH_S:-160} python -m bench.attention --quick \
    --profile --rounds 3 --dists ${DISTS:-u32_1024 lognormal_1k one_doc} \
    --providers flamia-mxfp8 "flamia-mxfp8 (persistent dK/dV)" \
    "flamia-nvfp4_fp8 (emulated NVFP4)" "flamia-nvfp4_fp8 (emulated NVFP4, persistent dK/dV)" \
    cudnn-thd cudnn-dense --out $OUT > $OUT/bench.log 2>&1
  grep -E "^\| |Error" $OUT/bench.log | grep -v "^| ---" | cut -d"|" -f2,3,6,9,13 | tail -30
  tier persist ${TIER_S:-100} tests/test_kernels_hopper.py -k \
    "persistent_is_the_plain or persistent_does_not_leak or dkdv8_setting"
  tier_report
  ;;
pt22)  # 2026-12-07 (twenty-second session): three P^T tiles in flight between the FP8 dK/dV
      # kernel's partitions (FLAMIA_GLUON_DKDV8=...,pt3): the dK/dV kernel against mxfp8's
      # default, each setting twice in turn (gluon_variants also compares dQ, dK, dV bit for bit
      # with the triton split kernels'), then the bitwise GPU tests (mxfp8 rows) (~5 min;
      # PT22_RECIPES="mxfp8 nvfp4_fp8" adds nvfp4_fp8's rows and 2,pt3; PT22_DISTS)
  recipes=${PT22_RECIPES:-mxfp8}
  configs="mxfp8:3,pipe:3,pipe,pt3:3,pipe:3,pipe,pt3"
  [[ $recipes == *nvfp4_fp8* ]] && configs="$configs nvfp4_fp8:2:2,pt3:2:2,pt3"
  FLAMIA_AUTOTUNE=0 step "dkdv8 variants" ${BENCH_S:-300} python -m bench.gluon_variants \
    --kernel dkdv8 --configs $configs --dists ${PT22_DISTS:-one_doc u32_1024 lognormal_1k \
    u1024_8192} > $OUT/dkdv8_variants.txt 2>&1
  grep "gluon" $OUT/dkdv8_variants.txt | cut -d"|" -f2-6
  tier pt3 ${TIER_S:-300} tests/test_kernels_hopper.py -k \
    "gluon_fp8_dkdv_is_the_triton and (${recipes// / or }) or dkdv8_setting" &
  wait
  tier_report
  ;;
inreg17)  # 2026-12-07 (seventeenth session): what the FP8 kernels' in-register row scales cost:
         # mxfp8 with them, without them (FLAMIA_UNSAFE_NO_INREG_SCALES=1: P' and dS' cast
         # unscaled, WRONG values, timing only), with them again; three processes back to back
         # (the switch is read at import), kernel profile (~4 min)
  for run in 0a 1 0b; do
    FLAMIA_UNSAFE_NO_INREG_SCALES=${run:0:1} FLAMIA_AUTOTUNE=8x3,4x3 step "bench inreg$run" \
      ${BENCH_S:-100} python -m bench.attention --quick --profile --rounds ${ROUNDS:-3} \
      --dists ${DISTS:-u32_1024 one_doc} --providers flamia-mxfp8 --tag _noscale$run \
      --out $OUT > $OUT/bench_noscale$run.log 2>&1
    grep -E "^\| |Error|experiment" $OUT/bench_noscale$run.log | grep -v "^| ---" | tail -6
  done
  ;;
quick17)  # 2026-12-07 (seventeenth session, ~650 s of device time left after failed starts):
         # inreg17, then h200q (on an H200 three workloads of the grid with the BF16 and
         # MXFP8 providers against cuDNN; no H200 has run the current kernels) (~7 min)
  ROUNDS=${ROUNDS:-2} bash $0 inreg17
  DISTS="u32_1024 lognormal_1k one_doc" BENCH_S=${BENCH_S:-200} bash $0 h200q
  ;;
final12)  # 2026-12-06 (twelfth session, last ~350 s of device time): the final tree (cuda_major
         # caches CUDA's availability): U(32, 1024) and lognormal 1k in 6 alternating rounds
         # against cuDNN THD, then the API GPU tests and the default kernels' leak rows
  FLAMIA_AUTOTUNE=8x3,4x3 step "bench" ${BENCH_S:-170} python -m bench.attention --quick \
    --rounds ${ROUNDS:-6} --dists ${DISTS:-u32_1024 lognormal_1k} --providers flamia-bf16 \
    cudnn-thd --out $OUT > $OUT/bench.log 2>&1
  grep -E "^\| |Error" $OUT/bench.log | grep -v "^| ---" | cut -d"|" -f2,6-9,13-17 | tail -8
  tier api ${TIER_S:-120} tests/test_api.py &
  tier leak ${TIER_S:-120} tests/test_kernels_hopper.py -k "do_not_leak and persistent" &
  wait
  tier_report
  ;;
hostab)  # written 2026-12-06 (thirteenth session) after its device time ran out: host time of
        # a BF16 fwd+bwd with triton's launch and the cached launch in alternating rounds of one
        # process (two processes differed by as much as the change), U(32, 1024) and one document
  FLAMIA_AUTOTUNE=8x3,4x3 step "ab" 150 python -m bench.host_layers --dists u32_1024 one_doc \
    --ab FLAMIA_LAUNCH=jit,cached > $OUT/host_layers_ab.txt 2>&1
  grep -E "^\| |^#" $OUT/host_layers_ab.txt
  ;;
bf16grid)  # 2026-12-06 (thirteenth session, ~600 s of device time left): every workload of the
          # grid, the BF16 providers only (flex left out: never the fastest baseline, and its
          # compiles take minutes), 4 alternating rounds, no accuracy table or profile (~6 min)
  FLAMIA_AUTOTUNE=8x3,4x3 step "bench" ${BENCH_S:-380} python -m bench.attention --providers \
    flamia-bf16 cudnn-thd cudnn-dense varlen --out $OUT > $OUT/bench.log 2>&1
  grep -E "^\| |Error" $OUT/bench.log | grep -v "^| ---" | cut -d"|" -f2-6,9,13,15,16
  ;;
launch)  # 2026-12-06 (thirteenth session): the cached launch (FLAMIA_LAUNCH=cached,
        # flamia/kernels/launch.py): its GPU tests (bits of triton's launch) beside the API tests
        # and the default kernels' leak rows, then host time per layer with each launch, then
        # U(32, 1024) and lognormal 1k in 6 alternating rounds (~8 min)
  tier launch ${TIER_S:-200} tests/test_launch.py &
  tier api ${TIER_S:-200} tests/test_api.py &
  tier leak ${TIER_S:-200} tests/test_kernels_hopper.py -k "do_not_leak and persistent" &
  wait
  tier_report
  for mode in jit cached; do
    FLAMIA_LAUNCH=$mode FLAMIA_AUTOTUNE=8x3,4x3 step "layers $mode" 80 python -m bench.host_layers \
      --dists u32_1024 > $OUT/host_layers_$mode.txt 2>&1
    grep -E "^\| u32" $OUT/host_layers_$mode.txt
  done
  FLAMIA_AUTOTUNE=8x3,4x3 step "bench" ${BENCH_S:-200} python -m bench.attention --quick \
    --rounds ${ROUNDS:-6} --dists ${DISTS:-u32_1024 lognormal_1k} --providers flamia-bf16 \
    "flamia-bf16 (cached launch)" cudnn-thd --out $OUT > $OUT/bench.log 2>&1
  grep -E "^\| |Error" $OUT/bench.log | grep -v "^| ---" | cut -d"|" -f2,6-9,13-17 | tail -12
  ;;
hostgap)  # 2026-12-06 (twelfth session): where the host shows in the timed fwd+bwd (GPU idle
         # time before each kernel, bench/host_gaps.py) and the host path layer by layer (~4 min)
  FLAMIA_AUTOTUNE=8x3,4x3 step "gaps" 200 python -m bench.host_gaps --dists u32_1024 one_doc \
    --providers flamia-bf16 flamia-mxfp8 cudnn-thd > $OUT/host_gaps.txt 2>&1
  grep -vE "Warn|warn" $OUT/host_gaps.txt | tail -40
  FLAMIA_AUTOTUNE=8x3,4x3 step "layers" 120 python -m bench.host_layers --dists u32_1024 \
    --cprofile "flamia fwd+bwd" > $OUT/host_layers.txt 2>&1
  grep -vE "Warn|warn" $OUT/host_layers.txt | head -60
  ;;
delta)
  tier delta ${TIER_S:-220} tests/test_kernels_hopper.py -k "delta_in_the_dq_kernel" &
  tier modes ${TIER_S:-220} tests/test_kernels_hopper.py -k "warp_specialized_dq or \
gluon_kernels_do_not_leak or gluon_fused_dq or doc_tiles_gluon" &
  tier fa ${TIER_S:-220} tests/test_kernels.py -k "fused_dq_matches or flash_attention_rule" &
  wait
  tier_report
  FLAMIA_AUTOTUNE=8x3,4x3 step "bench" ${BENCH_S:-280} python -m bench.attention --rounds 6 \
    --profile --dists u32_1024 u128_4096 lognormal_1k equal_2k one_doc --quick --providers \
    flamia-bf16 "flamia-bf16 (delta kernel)" "flamia-bf16 (persistent dQ)" cudnn-thd cudnn-dense \
    --out $OUT > $OUT/bench.log 2>&1
  grep -E "^\| |^- .*_(attn|delta)_|^###|Error" $OUT/bench.log | grep -v "^| ---" \
    | cut -d"|" -f2-9,13,15,16 | tail -60
  ;;
dkdvp)  # 2026-12-06 (eleventh session, the session's last ~280 s of device time): the persistent
       # dK/dV kernel (FLAMIA_GLUON_DKDV=2,0,persistent): its bitwise GPU tests at 2 ring slots
       # and its leak rows, then three workloads in 4 alternating rounds (~4.5 min)
  tier dkdvp ${TIER_S:-120} tests/test_kernels_hopper.py -k "plain_dkdv and 2-persistent" &
  tier leakp ${TIER_S:-120} tests/test_kernels_hopper.py -k "do_not_leak and persistent" &
  wait
  tier_report
  FLAMIA_AUTOTUNE=8x3,4x3 step "bench" ${BENCH_S:-120} python -m bench.attention --quick \
    --dists u128_4096 lognormal_1k one_doc --providers flamia-bf16 \
    "flamia-bf16 (persistent dK/dV)" cudnn-thd --out $OUT > $OUT/bench.log 2>&1
  grep -E "^\| |Error" $OUT/bench.log | grep -v "^| ---" | cut -d"|" -f2,6-9,13,15,16 | tail -12
  ;;
dkdvbench)  # the same comparison alone, five workloads in 8 alternating rounds (~2 min)
  FLAMIA_AUTOTUNE=8x3,4x3 step "bench" ${BENCH_S:-130} python -m bench.attention --quick \
    --rounds 8 --dists u32_1024 u128_4096 lognormal_1k equal_2k one_doc --providers \
    flamia-bf16 "flamia-bf16 (persistent dK/dV)" cudnn-thd --out $OUT > $OUT/bench.log 2>&1
  grep -E "^\| |Error" $OUT/bench.log | grep -v "^| ---" | cut -d"|" -f2,6-9,13,15,16 | tail -16
  ;;
dkdvdefault)  # the persistent dK/dV kernel as the default: FA rule through the default path and
             # the API tests, side by side (~1.5 min)
  tier fa ${TIER_S:-75} tests/test_kernels.py -k "flash_attention_rule" &
  tier api ${TIER_S:-75} tests/test_api.py &
  wait
  tier_report
  ;;
dqdefault)  # 2026-12-06 (eleventh session): the persistent dQ kernel computing delta as the
           # default: its GPU tests (dQ kernels, delta, leaks, FA rule, fused dQ, API), then the
           # full grid without nvfp4_fp8, the accuracy table and the profile (~9 min)
  tier dq ${TIER_S:-170} tests/test_kernels_hopper.py -k "dq or delta or leak" &
  tier fa ${TIER_S:-170} tests/test_kernels.py -k "flash_attention_rule or fused_dq_matches" &
  tier api ${TIER_S:-170} tests/test_api.py &
  wait
  tier_report
  FLAMIA_AUTOTUNE=8x3,4x3 step "bench" ${BENCH_S:-340} python -m bench.attention --providers \
    flamia-bf16 flamia-mxfp8 flex varlen cudnn-dense cudnn-thd --out $OUT > $OUT/bench.log 2>&1
  grep -E "^\| |Error" $OUT/bench.log | grep -v "^| ---" | cut -d"|" -f2-9,13,15,16 | tail -70
  ;;
d64)  # 2026-12-06 (written without a GPU): the forward at D = 64 with 3 and 4 ring slots (the
     # warp-specialized kernel, and the persistent one, which fits them at D = 64 only): GPU
     # tests (bits of the plain kernel), then the variants alone (~5 min)
  tier_s=${TIER_S:-150}
  tier d64 $tier_s tests/test_kernels_hopper.py -k "warp_specialized_forward_is_the_plain and \
persistent or ring_fits or config_is_checked" &
  wait
  tier_report
  FLAMIA_AUTOTUNE=0 step "fwd D=64" 150 python -m bench.gluon_variants --d 64 --configs \
    128,128,8,2,ws 128,128,8,3,ws 128,128,8,4,ws 128,128,8,2,persistent 128,128,8,3,persistent \
    128,128,8,4,persistent 128,64,8,3,persistent 128,64,8,4,persistent \
    --dists u32_1024 lognormal_1k one_doc > $OUT/fwd_variants_d64.txt 2>&1
  grep "^| " $OUT/fwd_variants_d64.txt | cut -d"|" -f2-3,5-6
  ;;
timeline)  # 2026-12-06: the persistent forward's timed-vs-kernel gap: kernel timelines after 3
          # and after 300 back-to-back calls (do_bench's sustained load; lower clocks would show
          # as longer kernels), with the SM clock before and after (~3 min)
  for warm in 3 300; do
    nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader
    FLAMIA_AUTOTUNE=0 step "timeline warm=$warm" 150 python -m bench.timeline --dist one_doc \
      --d 64 --warm $warm > $OUT/timeline_warm$warm.txt 2>&1
    nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader
    grep -E "^##|^call|gaps" $OUT/timeline_warm$warm.txt
  done
  ;;
default)  # 2026-12-06 (tenth session): the persistent forward as the default: the GPU tests that
         # run the default forward and the API tests (side by side), U(32, 1024) timed with and without nvidia-smi
         # sampling (its timings varied 35-47% between rounds), then the full grid (~9 min)
  tier fwd ${TIER_S:-170} tests/test_kernels_hopper.py -k "flash_attention_rule or \
matches_triton_forward or short_documents or doc_tiles_gluon" &
  tier leaks ${TIER_S:-170} tests/test_kernels_hopper.py -k "do_not_leak and not fp8" &
  tier ws ${TIER_S:-170} tests/test_kernels_hopper.py -k "warp_specialized_forward_is_the_plain" &
  tier api ${TIER_S:-170} tests/test_api.py &
  wait
  tier_report
  for ms in 0 100; do
    FLAMIA_AUTOTUNE=8x3,4x3 step "u32 sample-ms $ms" 80 python -m bench.attention --quick \
      --rounds 6 --sample-ms $ms --dists u32_1024 --providers flamia-bf16 \
      "flamia-bf16 (A/A control)" cudnn-thd --out $OUT/u32_sample$ms > $OUT/u32_sample$ms.log 2>&1
    grep -E "^\| " $OUT/u32_sample$ms.log | grep -v "^| ---" | cut -d"|" -f6-9,13,15
  done
  FLAMIA_AUTOTUNE=8x3,4x3 step "bench" ${BENCH_S:-330} python -m bench.attention --accuracy \
    --profile --out $OUT > $OUT/bench.log 2>&1
  grep -E "^\| |^(mxfp8|nvfp4|bf16|fp8)|Error" $OUT/bench.log | grep -v "^| ---" | tail -70 \
    | cut -d"|" -f2-7,9,13,15
  ;;
dkdv8default)  # written 2026-12-06 (fifteenth session): the Gluon FP8 dK/dV kernel as the
             # default on Hopper: the FP8 GPU tests and the Hopper FP8 rows side by side, then
             # U(32, 1024) and lognormal 1k in 4 alternating rounds against the triton dK/dV
             # kernels (~4 min); then the grid phase on the same tree
  tier fp8 ${TIER_S:-200} tests/test_kernels_fp8.py &
  tier hopper_fp8 ${TIER_S:-200} tests/test_kernels_hopper.py -k "fp8 or switch" &
  wait
  tier_report
  FLAMIA_AUTOTUNE=8x3,4x3 step "bench" ${BENCH_S:-120} python -m bench.attention --quick \
    --profile --rounds ${ROUNDS:-4} --dists ${DISTS:-u32_1024 lognormal_1k} --providers \
    flamia-mxfp8 "flamia-mxfp8 (triton dK/dV)" cudnn-thd --out $OUT > $OUT/bench.log 2>&1
  grep -E "^\| |^- .*_attn_|^###|Error" $OUT/bench.log | grep -v "^| ---" | tail -30
  ;;
final15)  # 2026-12-06 (fifteenth session, ~950 s of device time left after failed starts): the
         # full grid on the final tree (the Gluon FP8 dK/dV kernel as the default on Hopper),
         # then that kernel's GPU tests (its bits against the triton kernels', the default
         # included; the kernel switch) (~8 min)
  FLAMIA_AUTOTUNE=8x3,4x3 step "bench" ${BENCH_S:-400} python -m bench.attention --accuracy \
    --profile --out $OUT > $OUT/bench.log 2>&1
  grep -E "^\| |^(mxfp8|nvfp4|bf16|fp8)|Error" $OUT/bench.log | grep -v "^| ---" | tail -70 \
    | cut -d"|" -f2-7,9,13,15,16
  tier dkdv8 ${TIER_S:-100} tests/test_kernels_hopper.py -k \
    "(gluon_fp8_dkdv_is_the_triton_fp8_dkdv and mxfp8) or switch or (gluon_fp8_kernels_do_not_leak and mxfp8)"
  tier_report
  ;;
rowwise16)  # 2026-12-06 (sixteenth session): fp8_rowwise (mxfp8 with fp32 per-token scales) on
           # the FP8 kernels: the FP8 GPU tests (its quantizer's values, kernels against the
           # reference recipe with the default Gluon dK/dV kernel too, probes) beside the Hopper
           # FP8 rows, then U(32, 1024), lognormal 1k and one document in 3 alternating rounds:
           # mxfp8 against fp8_rowwise, with the accuracy table (~7 min)
  tier fp8 ${TIER_S:-250} tests/test_kernels_fp8.py &
  tier hopper_fp8 ${TIER_S:-250} tests/test_kernels_hopper.py -k "fp8 or switch" &
  wait
  tier_report
  FLAMIA_AUTOTUNE=8x3,4x3 step "bench" ${BENCH_S:-220} python -m bench.attention --quick \
    --accuracy --profile --rounds ${ROUNDS:-3} --dists ${DISTS:-u32_1024 lognormal_1k one_doc} \
    --providers flamia-mxfp8 flamia-fp8_rowwise flamia-bf16 cudnn-thd --out $OUT \
    > $OUT/bench.log 2>&1
  grep -E "^\| |^- .*_attn_|^###|Error" $OUT/bench.log | grep -v "^| ---" | tail -60
  ;;
gputests)  # the whole GPU tier in one call: four pytest processes side by side on the one GPU
          # (compiling kernels is most of their time, and the machine has 16 cores), each with
          # its own log; one process for all of them ran out of a call's time on 2026-12-05.
          # TIER_S: each tier's limit. On an H100 (80 GB; 2026-12-06 fourteenth session, run
          # with TIER_S=400 and all four side by side: hopper 290 s, hopper_fp8 221, triton_api
          # 78, fp8 69) two float64 FA-rule cases of triton_api ran out of GPU memory beside the
          # others; alone they pass. So triton_api now runs after the three others (~6.5 min)
          # 2026-12-07 (twentieth session, H100, TIER_S=380): the hopper tier ran 117 of its 120
          # tests in 380 s (none failed) beside the others: give it TIER_S=450 (~8.5 min in all).
  tier hopper_fp8 ${TIER_S:-400} tests/test_kernels_hopper.py -k fp8 &
  tier hopper ${TIER_S:-400} tests/test_kernels_hopper.py -k "not fp8" &
  tier fp8 ${TIER_S:-400} tests/test_kernels_fp8.py &
  wait
  tier triton_api ${API_S:-150} tests/test_kernels.py tests/test_api.py
  tier_report
  ;;
bench)  # the full grid with the accuracy table and autotune picks (~5 min), then the GPU tests of
        # the triton kernels and the API (the Gluon kernels' own: phase ws / dkdvws / dqws)
  TRITON_PRINT_AUTOTUNING=1 FLAMIA_AUTOTUNE=8x3,4x3 step "bench" 390 python -m bench.attention \
    --accuracy --profile --out $OUT > $OUT/bench.log 2>&1
  grep -E "^\| |^(mxfp8|nvfp4|bf16|fp8)|Error" $OUT/bench.log | grep -v "^| ---" | tail -70
  FLAMIA_AUTOTUNE=0 step "gpu tests" 170 python -m pytest -q -p no:cacheprovider \
    tests/test_kernels_fp8.py tests/test_kernels.py tests/test_api.py > $OUT/gpu_tests.log 2>&1
  grep -E "passed|failed|FAILED|Error" $OUT/gpu_tests.log | tail -12
  ;;
esac
