"""The Gluon kernels (flamia/kernels/attention_hopper.py) compiled for sm_90 on any machine (no
GPU needed): shared memory, registers and spills (ptxas), and for every wait for warpgroup MMAs
in flight how many of the softmax's exponentials (MUFU.EX2) ptxas scheduled while those MMAs run
(between the last MMA issue and the wait): the overlap the kernel is built for needs most of a
step's exponentials (64 per thread at 128 x 128 on 8 warps) there.

    python -m bench.gluon_report [--configs 128,128,8,2 64,64,4,2] [--d 128]

(the forward for each configuration, then the dQ and dK/dV kernels; --fwd8 mxfp8 nvfp4_fp8: the
FP8 forward too).

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
    """The compiled forward for FLAMIA_GLUON_FWD=config."""
    with mock.patch.dict(os.environ, {"FLAMIA_GLUON_FWD": config}):
        m, n, w, st = H.config()
        mode = H.fwd_mode()
    if mode:  # 64-row Q/O blocks, num_warps = 4 (the default partition)
        return _compile(H._attn_fwd_hopper_ws_kernel, ("q", "o"), ("k", "v"), (m // 2, n, 4, st),
                        d, hq, hkv, PINGPONG=mode == "pingpong", CONSUMER_REGS=H.WS_CONSUMER_REGS,
                        PRODUCER_REGS=H.WS_PRODUCER_REGS, drop=("BLOCK_M", ))
    return _compile(H._attn_fwd_hopper_kernel, ("q", "o"), ("k", "v"), (m, n, w, st), d, hq, hkv)


def compile_dq(d: int = 128, hq: int = 16, hkv: int = 16, mode: str = "plain"):
    """The compiled dQ kernel (its tiles are fixed: DQ_CONFIG), FLAMIA_GLUON_DQ=mode."""
    if mode == "ws":  # 64-row Q/dO/dQ blocks, num_warps = 4 (the default partition)
        m, n, _, st = H.DQ_CONFIG
        return _compile(H._attn_bwd_dq_hopper_ws_kernel, ("q", "do", "dq"), ("k", "v"),
                        (m // 2, n, 4, st), d, hq, hkv, drop=("BLOCK_M", ),
                        CONSUMER_REGS=H.DQ_WS_CONSUMER_REGS, PRODUCER_REGS=H.DQ_WS_PRODUCER_REGS)
    return _compile(H._attn_bwd_dq_hopper_kernel, ("q", "do", "dq"), ("k", "v"), H.DQ_CONFIG,
                    d, hq, hkv)


def compile_dkdv(pipeline: str | None = None, d: int = 128, hq: int = 16, hkv: int = 16,
                 fuse_dq: int = 0, lse_tma: bool = False):
    """The compiled dK/dV kernel (DKDV_CONFIG: query tiles are the "query" descriptors) for
    FLAMIA_GLUON_DKDV=pipeline (None: the default); fuse_dq: 0 (dQ kernel), 1 (dQ added in
    key-tile order), 2 (dQ added unordered)."""
    with mock.patch.dict(os.environ, {"FLAMIA_GLUON_DKDV": pipeline or ""}):
        stages, defer, _, ws = H.dkdv_pipeline()
    if ws:  # 64-key K/V/dK/dV blocks, num_warps = 4 (the default partition)
        m, n, _ = H.DKDV_CONFIG[:3]
        q = torch.empty(4096, hq, d, dtype=torch.bfloat16)
        k = torch.empty(4096, hkv, d, dtype=torch.bfloat16)
        descs = {f"{x}_desc": H._rows_view(q, m) for x in ("q", "do")}
        descs.update({f"{x}_desc": H._rows_view(k, n // 2) for x in ("k", "v", "dk", "dv")})
        vectors = {}
        if lse_tma:  # FLAMIA_GLUON_DKDV_LSE=tma
            descs.update({f"{x}_desc": H._vector_view(torch.empty(hq, 4096), m)
                          for x in ("lse", "delta")})
        else:
            vectors = {"lse_desc": None, "delta_desc": None}
        return _compile(H._attn_bwd_dkdv_hopper_ws_kernel, (), (), (m, n // 2, 4, stages), d,
                        hq, hkv, drop=("BLOCK_N", ), descs=descs, LSE_TMA=lse_tma,
                        CONSUMER_REGS=H.DKDV_WS_CONSUMER_REGS,
                        PRODUCER_REGS=H.DKDV_WS_PRODUCER_REGS, **vectors)
    return _compile(H._attn_bwd_dkdv_hopper_kernel, ("q", "do"), ("k", "v", "dk", "dv"),
                    H.DKDV_CONFIG[:3] + (stages, ), d, hq, hkv, DEFER=defer,
                    FUSE_DQ=fuse_dq > 0, ORDERED=fuse_dq == 1)


def compile_fwd8(d: int = 128, hq: int = 16, hkv: int = 16, qk_dtype=torch.float8_e4m3fn,
                 mode: str = "inflight"):
    """The compiled FP8 forward (FWD8_CONFIG, FLAMIA_GLUON_FWD8=mode); qk_dtype bfloat16:
    nvfp4_fp8's Q and K."""
    m, n, _, st = H.FWD8_CONFIG
    descs = {"q_desc": H._rows_view(torch.empty(4096, hq, d, dtype=qk_dtype), m // 2),
             "k_desc": H._rows_view(torch.empty(4096, hkv, d, dtype=qk_dtype), n),
             "vt_desc": H._token_major_view(
                 torch.empty(hkv, d, 4096, dtype=torch.float8_e4m3fn), n),
             "o_desc": H._rows_view(torch.empty(4096, hq, d, dtype=torch.bfloat16), m // 2)}
    # The scale rows' head stride (2 T) is a multiple of 16 at the benchmark's sizes, which the
    # launch specializes on: the scale loads are 16-byte vectors then.
    return _compile(H._attn_fwd8_hopper_ws_kernel, (), (), (m // 2, n, 4, st), d, hq, hkv,
                    drop=("BLOCK_M", ), descs=descs, aligned=("stride_skh", ),
                    CONSUMER_REGS=H.FWD8_CONSUMER_REGS, PRODUCER_REGS=H.FWD8_PRODUCER_REGS,
                    OVERLAP=mode == "overlap")


def compile_dkdv8(d: int = 128, hq: int = 16, hkv: int = 16, qk_dtype=torch.float8_e4m3fn,
                  setting: str = ""):
    """The compiled FP8 dK/dV kernel for FLAMIA_GLUON_DKDV8=setting ('' = DKDV8_CONFIG);
    qk_dtype bfloat16: nvfp4_fp8's Q and K."""
    m, n, _ = H.DKDV8_CONFIG
    with mock.patch.dict(os.environ, {"FLAMIA_GLUON_DKDV8": setting}):
        st, pipe = H.dkdv8_setting()
    fp8 = torch.float8_e4m3fn
    descs = {"q_desc": H._rows_view(torch.empty(4096, hq, d, dtype=qk_dtype), m),
             "k_desc": H._rows_view(torch.empty(4096, hkv, d, dtype=qk_dtype), n),
             "v_desc": H._rows_view(torch.empty(4096, hkv, d, dtype=fp8), n),
             "do_desc": H._rows_view(torch.empty(4096, hq, d, dtype=fp8), m),
             "qt_desc": H._token_major_view(torch.empty(hq, d, 4096, dtype=qk_dtype), m),
             "dot_desc": H._token_major_view(torch.empty(hq, d, 4096, dtype=fp8), m),
             "qrow_desc": H._query_rows_view(torch.empty(hq, 4096, 4), m)}
    return _compile(H._attn_bwd_dkdv8_hopper_ws_kernel, (), (), (m, n, 4, st), d, hq, hkv,
                    drop=("BLOCK_N", ), descs=descs, aligned=("stride_skh", ),
                    ptrs={"dk_ptr": "*bf16", "dv_ptr": "*bf16"}, PIPE=pipe,
                    CONSUMER_REGS=H.DKDV8_CONSUMER_REGS, PRODUCER_REGS=H.DKDV8_PRODUCER_REGS)


def _compile(fn, query_descs, key_descs, config, d, hq, hkv, drop=(), descs=None, aligned=(),
             ptrs=None, **extra_consts):
    """Descriptors of CPU tensors stand in for the GPU's: only their dtype, block shape and
    layout enter the signature. ``descs``: descriptors by argument name, instead of bf16 ones
    for query_descs and key_descs; ``aligned``: integer arguments known to be multiples of 16;
    ``ptrs``: pointer types by argument name (default *i32 for the plan's arrays, else *fp32)."""
    m, n, w, st = config
    if descs is None:
        q = torch.empty(4096, hq, d, dtype=torch.bfloat16)
        k = torch.empty(4096, hkv, d, dtype=torch.bfloat16)
        descs = {f"{x}_desc": H._rows_view(q, m) for x in query_descs}
        descs.update({f"{x}_desc": H._rows_view(k, n) for x in key_descs})
    consts = dict(H_Q=hq, H_KV=hkv, HEAD_DIM=d, BLOCK_M=m, BLOCK_N=n, STAGES=st, num_warps=w,
                  **extra_consts)
    for name in drop:  # constexprs this kernel does not take
        del consts[name]
    sig, attrs = {}, {}
    for i, arg in enumerate(fn.arg_names):
        if arg in consts:
            sig[arg] = "constexpr"
        elif arg in descs:
            sig[arg] = mangle_type(descs[arg])
        elif arg.endswith("_ptr"):
            plan = ("seg_start_ptr", "seg_end_ptr", "order_ptr", "sem_ptr")
            sig[arg] = (ptrs or {}).get(arg) or ("*i32" if arg in plan else "*fp32")
            attrs[(i,)] = [["tt.divisibility", 16]]
        else:
            sig[arg] = "fp32" if arg in ("c", "sm_scale") else "i32"  # total, strides, counts
            if arg in aligned:
                attrs[(i,)] = [["tt.divisibility", 16]]
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
    return [line for line in out.splitlines() if re.match(r"\s+/\*[0-9a-f]{4,}\*/", line)]


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
    ap.add_argument("--configs", nargs="*", default=[",".join(map(str, H.DEFAULT_CONFIG))])
    ap.add_argument("--dkdv", nargs="*", default=[""],
                    help="FLAMIA_GLUON_DKDV values of the dK/dV kernel ('' = default)")
    ap.add_argument("--lse-tma", action="store_true",
                    help="warp-specialized dK/dV kernel: also with FLAMIA_GLUON_DKDV_LSE=tma")
    ap.add_argument("--fuse-dq", type=int, nargs="+", default=[0],
                    help="dK/dV kernel: 0 dQ kernel, 1 fused dQ ordered, 2 fused dQ unordered")
    ap.add_argument("--dq", nargs="*", default=["plain"], choices=H.DQ_MODES,
                    help="FLAMIA_GLUON_DQ values of the dQ kernel")
    ap.add_argument("--fwd8", nargs="*", default=[], choices=("mxfp8", "nvfp4_fp8"),
                    help="also the FP8 forward for these recipes")
    ap.add_argument("--dkdv8", nargs="*", default=[],
                    help="also the FP8 dK/dV kernel: recipe[:FLAMIA_GLUON_DKDV8], e.g. mxfp8 "
                         "nvfp4_fp8 mxfp8:3,pipe")
    ap.add_argument("--d", type=int, default=128)
    args = ap.parse_args(argv)
    print(f"# triton {triton.__version__}, sm_90, D={args.d}")
    dq = ",".join(map(str, H.DQ_CONFIG))
    dkdv = ",".join(map(str, H.DKDV_CONFIG[:3]))
    for name, compiled in [(f"fwd {c}", compile_fwd(c, args.d)) for c in args.configs] + [
            (f"dq {dq} {m}", compile_dq(args.d, mode=m)) for m in args.dq] + [
            (f"dkdv {dkdv} {p or 'default'} fuse_dq={f}", compile_dkdv(p, args.d, fuse_dq=f))
            for p in args.dkdv for f in args.fuse_dq if not (p.endswith("ws") and f)] + [
            (f"dkdv {dkdv} {p} lse=tma", compile_dkdv(p, args.d, lse_tma=True))
            for p in args.dkdv if p.endswith("ws") and args.lse_tma] + [
            (f"fwd8 {r}", compile_fwd8(args.d, qk_dtype=torch.bfloat16 if r == "nvfp4_fp8"
                                       else torch.float8_e4m3fn)) for r in args.fwd8] + [
            (f"dkdv8 {r}", compile_dkdv8(args.d, qk_dtype=torch.bfloat16 if r.startswith("nvfp4")
                                         else torch.float8_e4m3fn,
                                         setting=r.split(":")[1] if ":" in r else ""))
            for r in args.dkdv8]:
        print(f"gluon {name}: shared {compiled.metadata.shared} B, "
              f"{registers_and_spills(compiled.asm['ptx'])}")
        lines = sass_lines(compiled.asm["cubin"])
        # HGMMA: BF16 MMAs; QGMMA: FP8 ones
        print(f"  HGMMA {sum('HGMMA' in line for line in lines)} "
              f"QGMMA {sum('QGMMA' in line for line in lines)}")
        print("  MMA waits (pending groups allowed: exponentials overlapping the MMAs in flight): "
              + ", ".join(f"{n}: {e}" for n, e in overlapped_exps(lines)))

if __name__ == "__main__":
    main()
