#!/usr/bin/env bash
# Where the fused-dQ backward (FLAMIA_DQ=fused) loses time, on the H200: the same benchmark rows
# for the committed kernel and for two diagnostic patches of a copy of the tree (never
# committed: they break determinism or drop dQ):
#   unordered  the adds skip the wait for their turn (fp32 atomics in any order)
#   no_adds    the adds are predicated off (dS K is still computed; dQ is wrong)
# Timed by bench/dq_time.py (no correctness gate; it prints each mode's dQ difference to the
# separate mode instead).
# Usage (device tool): bash bench/dq_diagnose.sh, carry [".whl"]; writes $OUT/dq_<variant>.log
set -u
export PYTHONUNBUFFERED=1
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl
fi
patch_kernel() {  # $1 = variant, in the tree copy /tmp/dq_$1
  python3 - "$1" <<'PY'
import sys
v = sys.argv[1]
p = f"/tmp/dq_{v}/flamia/kernels/attention.py"
s = open(p).read()
wait = '"WAIT: ld.acquire.gpu.global.b32 $0, [$1]; setp.ne.s32 p, $0, want; @p bra WAIT; "'
assert wait in s
s = s.replace(wait, '"ld.acquire.gpu.global.b32 $0, [$1]; mov.u32 $0, want; "')
if v == "no_adds":
    s = s.replace("in_order = count == rank\n", "in_order = count == rank + 1000000\n")
open(p, "w").write(s)
PY
}
for v in committed unordered no_adds; do
  rm -rf /tmp/dq_$v && mkdir -p /tmp/dq_$v && cp -r flamia bench /tmp/dq_$v/
  [ $v = committed ] || patch_kernel $v
  (cd /tmp/dq_$v && PYTHONPATH=/tmp/site:/tmp/dq_$v FLAMIA_AUTOTUNE=8x3 FLAMIA_DQ=fused \
    timeout 150 python -m bench.dq_time > $OUT/dq_$v.log 2>&1; echo "rc=$?" >> $OUT/dq_$v.log)
  echo "== $v"; tail -6 $OUT/dq_$v.log
done
