"""Compile the attention kernels for sm_90 (or sm_100) on any machine (no GPU needed) and report, per kernel
and recipe, how its tile loads are lowered: pipelined (async copies into shared memory) or
synchronous loads through registers, plus shared memory and wgmma counts.

    python -m bench.ir_report [--stages 2] [--arch 100 --mma mx]

Triton specializes integer arguments at launch (multiples of 16, and 1); this compiles with the
same hints the launchers produce on the GPU (pointers and strides divisible by 16, unit strides
passed as 1). The local triton may differ from the GPU image's.
"""

from __future__ import annotations

import argparse
import re

import triton
from triton.backends.compiler import GPUTarget

from flamia.kernels import attention as K

KERNELS = {  # name -> (kernel, its tile table entry in flamia.kernels.attention, unit strides)
    "fwd": (K._attn_fwd_kernel, "fwd", {"stride_vt"}),
    "dkdv": (K._attn_bwd_dkdv_kernel, "dkdv", {"stride_qkt", "stride_dokt"}),
    "dq": (K._attn_bwd_dq_kernel, "dq", {"stride_kkt"}),
}
# dK/dV launches (PART, see flamia.kernels.attention.dkdv_parts): one fused kernel, or the FP8
# recipes' default pair of a dV-only and a dK-only kernel.
DKDV_PARTS = {"dkdv": 0, "dkdv_dv": 1, "dkdv_dk": 2}
KERNELS.update({name: KERNELS["dkdv"] for name in DKDV_PARTS if name != "dkdv"})
# BF16's dK/dV kernel that also accumulates dQ (FLAMIA_DQ=fused, DQ_FUSED).
KERNELS["dkdv_dq"] = KERNELS["dkdv"]


def fp8_variants(name: str) -> tuple[bool, ...]:
    """The IS_FP8 variants a report compiles for a kernel name: the dK/dV parts are FP8-only,
    the fused-dQ dK/dV kernel BF16-only."""
    if name == "dkdv_dq":
        return (False,)
    return (True,) if DKDV_PARTS.get(name, 0) else (False, True)
DATA_PTRS = ("q_ptr", "k_ptr", "v_ptr", "do_ptr", "qk_ptr", "dok_ptr", "kk_ptr")
OUT_PTRS = ("o_ptr", "dk_ptr", "dv_ptr", "dq_ptr")
INT_PTRS = ("seg_start_ptr", "seg_end_ptr", "order_ptr", "sem_ptr")


def compile_for(name: str, fp8: bool, head_dim: int = 128, heads: int = 16,
                warps: int | None = None, stages: int = 2, arch: int = 90, mma: int = 0,
                maxnreg: int | None = None, doc: bool = False):
    """``name``'s kernel compiled as the launchers compile it; doc: with doc tiles (BF16,
    kernels.attention.doc_tiles)."""
    kernel, family, unit_strides = KERNELS[name]
    if warps is None:  # the H200 autotuner's usual picks (bench/results/autotune_20261203-1404)
        warps = 4 if fp8 else 8
    # The launchers' tile shape for this family and recipe (FLAMIA_*_BLOCKS overrides it).
    block_m, block_n = K._blocks(family, head_dim, fp8, mma)
    fn = kernel.fn  # under the autotuner
    consts = dict(H_Q=heads, H_KV=heads, HEAD_DIM=head_dim, BLOCK_M=block_m, BLOCK_N=block_n,
                  IS_FP8=fp8, QK_BF16=False, FP8_MMA=mma if fp8 else 0,
                  DOC_TILES=doc)
    if name in DKDV_PARTS or name == "dkdv_dq":
        consts["PART"] = DKDV_PARTS.get(name, 0)
        consts["DQ_FUSED"] = name == "dkdv_dq"
    if fp8:
        consts.update({s: 1 for s in unit_strides})
    elif name == "fwd":
        consts["stride_vd"] = 1  # the bf16 launcher passes V's unit D stride as the literal 1
    ptr_type = lambda arg: ("*fp8e4nv" if fp8 else "*bf16") if arg in DATA_PTRS else (
        "*bf16" if arg in OUT_PTRS else "*i32" if arg in INT_PTRS else "*fp32")
    return _compile(fn, consts, ptr_type, arch, {"num_warps": warps, "num_stages": stages,
                                                 "maxnreg": maxnreg})


def _compile(fn, consts, ptr_type, arch, options):
    """fn compiled with the launchers' hints: constexprs, pointers (ptr_type(name)) and strides
    divisible by 16, the softmax scales fp32, other arguments i32."""
    sig, attrs = {}, {}
    for i, arg in enumerate(fn.arg_names):
        if arg in consts:
            sig[arg] = "constexpr"
        elif arg.endswith("_ptr"):
            sig[arg] = ptr_type(arg)
            attrs[(i,)] = [["tt.divisibility", 16]]
        elif arg in ("qk_scale", "sm_scale"):
            sig[arg] = "fp32"
        else:
            sig[arg] = "i32"
            if arg.startswith("stride_"):
                attrs[(i,)] = [["tt.divisibility", 16]]
    src = triton.compiler.ASTSource(fn=fn, signature=sig, constexprs=consts, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", arch, 32), options=options)


def compile_prologue(fp8: bool, head_dim: int = 128, arch: int = 90, fp32_scale: bool = False):
    """The backward's first kernel: the delta kernel (BF16; FP8 with dO quantized by the
    caller) or, fp8, the kernel that quantizes dO and computes delta in one pass
    (_attn_bwd_prep8_kernel; fp32_scale: fp8_rowwise's quantizer), with the launchers' hints
    (pointers and strides divisible by 16)."""
    fn = K._attn_bwd_prep8_kernel if fp8 else K._attn_bwd_delta_kernel
    consts = {"HEAD_DIM": head_dim, "BLOCK_T": 64}
    if fp8:
        consts["FP32_SCALE"] = fp32_scale
    else:
        consts["IS_FP8"] = False
    ptr_types = {"do_ptr": "*bf16", "o_ptr": "*bf16", "do8_ptr": "*fp8e4nv",
                 "dot_ptr": "*fp8e4nv"}
    return _compile(fn, consts, lambda arg: ptr_types.get(arg, "*fp32"), arch,
                    {"num_warps": 4, "num_stages": 2})


def summarize(compiled) -> dict:
    ir = compiled.asm["ttgir"]
    sync = re.findall(r"%(\w+?)_?\d* = tt.load [^\n]*tensor<(?:64|128)x(?:64|128)x", ir)
    return {"async copies": len(re.findall("async_copy_global_to_local", ir)),
            "sync tile loads": sorted(set(sync)),
            "wgmma": len(re.findall("ttng.warp_group_dot ", ir)),
            "scaled mma": len(re.findall(r"tc_gen5_mma_scaled|dot_scaled", ir)),
            "tcgen05 mma": len(re.findall(r"ttng.tc_gen5_mma", ir)),
            "shared bytes": compiled.metadata.shared}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--stages", type=int, default=2)
    ap.add_argument("--warps", type=int, default=None,
                    help="default: 8 for bf16, 4 for the FP8 kernels (the H200 autotuner's picks)")
    ap.add_argument("--arch", type=int, default=90, help="90 (H100/H200) or 100 (B200)")
    ap.add_argument("--mma", choices=("fast", "precise", "mx"), default="fast",
                    help="FP8 MMA mode of the mxfp8 variant (see FLAMIA_FP8_MMA)")
    ap.add_argument("--prologue", action="store_true",
                    help="instead: compile the backward's first kernel (delta; FP8: dO quantizer "
                         "with delta) and report its shared memory")
    ap.add_argument("--doc", action="store_true",
                    help="the BF16 kernels with doc tiles (FLAMIA_TILES=doc; FP8 keeps the grid)")
    args = ap.parse_args(argv)
    if args.prologue:
        for name, fp8, fp32_scale in (("bf16 ", False, False), ("mxfp8", True, False),
                                      ("fp8_rowwise", True, True)):
            c = compile_prologue(fp8, arch=args.arch, fp32_scale=fp32_scale)
            print(f"prologue {name}: {c.name}, shared {c.metadata.shared} B")
        return
    mma = ("fast", "precise", "mx").index(args.mma)
    warps = args.warps or "8 (bf16) / 4 (fp8)"
    print(f"triton {triton.__version__}, sm_{args.arch}, D=128, {warps} warps, "
          f"{args.stages} stages, mxfp8 MMA mode {args.mma}")
    for name in KERNELS:
        for fp8 in fp8_variants(name):
            if args.doc and (fp8 or name == "dkdv_dq"):  # doc tiles: BF16, separate dQ only
                continue
            s = summarize(compile_for(name, fp8, warps=args.warps, stages=args.stages,
                                      arch=args.arch, mma=mma, doc=args.doc))
            print(f"{name:7} {'mxfp8' if fp8 else 'bf16 ':5} async copies {s['async copies']:3}, "
                  f"wgmma {s['wgmma']:2}, tcgen05 mma {s['tcgen05 mma']:2} (scaled "
                  f"{s['scaled mma']:2}), shared {s['shared bytes']:6} B, synchronous tile "
                  f"loads: {', '.join(s['sync tile loads']) or '-'}")


if __name__ == "__main__":
    main()
