#!/usr/bin/env bash
# One planned H200 call (device tool) for the next session: GPU test tier, FP8 kernel check,
# full benchmark with the accuracy table, and a short 125M BF16-vs-MXFP8 training comparison.
# Written without GPU access (2026-12-02): untested as a whole; each step logs under $OUT and a
# failing step does not stop the next ones.
#
# Prepare here (CPU machine), once:
#   ../shared/device/wheels.sh               # torchtitan + deps as wheels in .whl/
#   FLAMIA_CACHE=$PWD/.cache/flamia python -m data.report --corpus python-docs   # tokenizer+shards
#   (.whl/ and .cache/ are git-ignored: name both in the run's carry list)
# Run (device tool): command "bash bench/h200_session.sh", carry [".whl", ".cache"], 600 s.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 FLAMIA_CACHE=$PWD/.cache/flamia
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv | tee $OUT/gpu.txt
step() { echo "== $1"; shift; timeout "$@"; echo "rc=$?"; }
step "fp8 check" 120 python -m bench.fp8_check 2>&1 | tee $OUT/fp8_check.log | grep -v Warn
step "gpu tests" 200 python -m pytest -q -x -p no:cacheprovider tests/test_kernels_fp8.py \
  tests/test_kernels.py tests/test_api.py > $OUT/gpu_tests.log 2>&1; tail -5 $OUT/gpu_tests.log
step "bench" 240 python -m bench.attention --quick --dists one_doc u32_1024 lognormal_1k \
  --accuracy --out $OUT > $OUT/bench.log 2>&1; tail -30 $OUT/bench.log
for v in bf16 mxfp8; do
  step "train 125M $v" 60 torchrun --nproc_per_node=1 -m train \
    --job.config_file configs/llama3_125m_$v.toml --training.steps 100 \
    --job.dump_folder $OUT/run_$v --checkpoint.no-enable > $OUT/train_$v.log 2>&1
  tail -2 $OUT/train_$v.log
done
python -m train.compare $OUT/run_bf16 $OUT/run_mxfp8 --out $OUT/compare.png || true
