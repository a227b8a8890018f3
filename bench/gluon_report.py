"""The Gluon forward (flamia/kernels/attention_hopper.py) compiled for sm_90 on any machine (no
GPU needed): shared memory, registers and spills (ptxas), and for every wait for warpgroup MMAs
in flight how many of the softmax's exponentials (MUFU.EX2) ptxas scheduled while those MMAs run
(between the last MMA issue and the wait): the overlap the kernel is built for needs most of a
step's exponentials (64 per thread at 128 x 128 on 8 warps) there.

    python -m bench.gluon_report [--configs 128,128,8,2 64,64,4,2] [--d 128]

Use the GPU image's triton to judge the GPU's code (see bench/sass_report.py):
    PYTHONPATH=/tmp/t36:$PWD python -m bench.gluon_report
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import tempfile
from unittest import mock

import torch
import triton
from triton import knobs
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon._runtime import GluonASTSource
from triton.runtime.jit import mangle_type

from bench.sass_report import registers_and_spills
from flamia.kernels import attention_hopper as H


def compile_fwd(config: str, d: int = 128, hq: int = 16, hkv: int = 16):
    """The compiled kernel for FLAMIA_GLUON_FWD=config (descriptors of CPU tensors: only their
    dtype, block shape and layout enter the signature)."""
    with mock.patch.dict(os.environ, {"FLAMIA_GLUON_FWD": config}):
        m, n, w, st = H.config()
    q = torch.empty(4096, hq, d, dtype=torch.bfloat16)
    k = torch.empty(4096, hkv, d, dtype=torch.bfloat16)
    descs = {"q_desc": H._rows_view(q, m), "k_desc": H._rows_view(k, n),
             "v_desc": H._rows_view(k, n), "o_desc": H._rows_view(q, m)}
    fn = H._attn_fwd_hopper_kernel
    consts = dict(H_Q=hq, H_KV=hkv, HEAD_DIM=d, BLOCK_M=m, BLOCK_N=n, STAGES=st, num_warps=w)
    sig, attrs = {}, {}
    for i, arg in enumerate(fn.arg_names):
        if arg in consts:
            sig[arg] = "constexpr"
        elif arg in descs:
            sig[arg] = mangle_type(descs[arg])
        elif arg.endswith("_ptr"):
            sig[arg] = "*fp32" if arg == "lse_ptr" else "*i32"
            attrs[(i,)] = [["tt.divisibility", 16]]
        else:
            sig[arg] = "fp32" if arg == "c" else "i32"
    src = GluonASTSource(fn=fn, signature=sig, attrs=attrs,
                         constexprs={(fn.arg_names.index(a),): v for a, v in consts.items()})
    return triton.compile(src, target=GPUTarget("cuda", 90, 32),
                          options={"num_warps": w, "num_stages": 1})


def sass_lines(cubin: bytes) -> list[str]:
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        out = subprocess.run([knobs.nvidia.cuobjdump.path, "-sass", f.name], capture_output=True,
                             text=True).stdout
    return [line for line in out.splitlines() if re.match(r"\s+/\*[0-9a-f]{4}\*/", line)]


def overlapped_exps(lines: list[str]) -> list[tuple[str, int]]:
    """For every wait for MMAs in flight (WARPGROUP.DEPBAR.LE gsb0, N): the exponentials issued
    between the last MMA issue before it and the wait, i.e. those that overlap in-flight MMAs."""
    out, last_mma = [], None
    for i, line in enumerate(lines):
        if "HGMMA" in line:
            last_mma = i
        m = re.search(r"WARPGROUP\.DEPBAR\.LE gsb0, (0x\d+)", line)
        if m and last_mma is not None:
            out.append((m.group(1), sum("MUFU.EX2" in lines[t] for t in range(last_mma, i))))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--configs", nargs="+", default=[",".join(map(str, H.DEFAULT_CONFIG))])
    ap.add_argument("--d", type=int, default=128)
    args = ap.parse_args(argv)
    print(f"# triton {triton.__version__}, sm_90, D={args.d}")
    for config in args.configs:
        compiled = compile_fwd(config, args.d)
        print(f"gluon fwd {config}: shared {compiled.metadata.shared} B, "
              f"{registers_and_spills(compiled.asm['ptx'])}")
        lines = sass_lines(compiled.asm["cubin"])
        print(f"  HGMMA {sum('HGMMA' in line for line in lines)}")
        print("  MMA waits (pending groups allowed: exponentials overlapping the MMAs in flight): "
              + ", ".join(f"{n}: {e}" for n, e in overlapped_exps(lines)))

if __name__ == "__main__":
    main()
