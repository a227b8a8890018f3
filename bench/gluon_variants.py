"""One BF16 kernel alone, the triton kernel against Gluon configurations, on bench.attention's
workloads, in one process on the GPU:

    python -m bench.gluon_variants [--configs 128,128,8,2 64,64,4,2] [--dists one_doc u32_1024]
    python -m bench.gluon_variants --kernel dkdv [--configs 2,0 3,1]
    python -m bench.gluon_variants --kernel dq [--configs plain ws]
    python -m bench.gluon_variants --kernel fwd8 [--configs mxfp8 nvfp4_fp8]
    python -m bench.gluon_variants --kernel dkdv8 [--configs mxfp8:2:3:3,pipe nvfp4_fp8]

--kernel fwd (default): the forward, configs FLAMIA_GLUON_FWD=M,N,W,S[,ws|,pingpong|,persistent].
--kernel
dkdv: the dK/dV kernel, configs FLAMIA_GLUON_DKDV=S,D (the plain kernel), or S,D,ws (the
warp-specialized one; S,D,ws,tma: with FLAMIA_GLUON_DKDV_LSE=tma), or S,D,fused
(FLAMIA_DQ=fused: dQ added by the dK/dV kernel in key-tile order) or S,D,unordered (the same in
any order), or triton,fused (the triton dK/dV kernel with FLAMIA_DQ=fused); timed as the whole
backward call (the dQ kernel, where there is one, is the triton one in every variant); "kernel
ms" counts the dK/dV kernel only. The first
row of each workload (the triton dK/dV kernel and dQ kernel) is the reference of the diffs.
--kernel dq: the dQ kernel, configs FLAMIA_GLUON_DQ=plain|ws|persistent, timed as the whole
backward call (dK/dV by the default kernel); "kernel ms" counts the dQ kernel only.
--kernel fwd8: the FP8 forward alone on Q, K, V quantized beforehand (configs: recipes, or
recipe:mode:mode with FLAMIA_GLUON_FWD8 modes), the triton kernel (64-query tiles) against the
Gluon one (FLAMIA_FWD_KERNEL=gluon); "bitwise" says whether O and lse2 are the same bits as the
triton kernel's.
--kernel dkdv8: the FP8 backward (configs: recipes, or recipe:X:Y with FLAMIA_GLUON_DKDV8
settings, e.g. mxfp8:2:3:3,pipe) with the triton dK/dV kernels (split, the default, and fused)
against the Gluon FP8 dK/dV kernel (FLAMIA_DKDV_KERNEL=gluon); "kernel ms" counts the dK/dV
kernels only; "bitwise": dQ, dK, dV the same bits as the split kernels'.

Per variant and workload: the output's relative difference to the triton kernel's (O; dK for
dkdv: a check, not a precision measure), the median time of one call (do_bench, host work
included), the GPU time of the kernel (torch.profiler) and the host time of one call (50 calls
issued back to back, timed on the host before synchronizing: the launch path's cost).
"""

from __future__ import annotations

import argparse
import os
import time
from unittest import mock

import torch

from bench.attention import causal_flops, workload_inputs
from flamia.kernels import attention as K
from flamia.ops import batch_plan

DEFAULT_CONFIGS = ["128,128,8,2,ws", "128,128,8,2", "128,128,8,2,pingpong", "64,64,4,2",
                   "128,64,8,3"]
# Riskiest last: a variant that hangs (the timeout ends the process) leaves the rows before it.
DEFAULT_DKDV_CONFIGS = ["2,0,ws", "2,0", "4,1", "triton,fused", "2,0,unordered", "2,0,fused"]


def _dkdv_env(config: str) -> dict:
    if config == "triton,fused":
        return {"FLAMIA_DKDV_KERNEL": "triton", "FLAMIA_DQ": "fused"}
    if config.endswith(",ws,tma"):  # lse2 and delta by the producer's TMA
        return {**_dkdv_env(config[:-len(",tma")]), "FLAMIA_GLUON_DKDV_LSE": "tma"}
    stages, defer, *mode = config.split(",")
    mode = mode[0] if mode else "separate"
    if mode == "ws":  # the warp-specialized kernel (dQ by the dQ kernel)
        return {"FLAMIA_DKDV_KERNEL": "gluon", "FLAMIA_GLUON_DKDV": f"{stages},{defer},ws",
                "FLAMIA_DQ": "separate"}
    return {"FLAMIA_DKDV_KERNEL": "gluon",
            "FLAMIA_GLUON_DKDV": f"{stages},{defer},{int(mode == 'unordered')}",
            "FLAMIA_DQ": "separate" if mode == "separate" else "fused"}


def kernel_ms(fn, calls=20, name=""):
    """Mean GPU time of the kernels one call launches whose name contains ``name``
    (torch.profiler)."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    total_us = sum(e.device_time_total for e in prof.key_averages()
                   if e.device_type == torch.autograd.DeviceType.CUDA and name in e.key)
    return total_us / 1e3 / calls


def host_us(fn, calls=50):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / calls * 1e6


def fwd8_rows(dist, recipes, d):
    """--kernel fwd8: the triton and Gluon FP8 forwards of each recipe on one workload."""
    from triton.testing import do_bench

    from flamia.kernels.quantize import quantize_qkv

    lengths, q, k, v, _, cu = workload_inputs(dist, 4, 8192, 16, 16, d)
    flops = causal_flops(lengths, 16, d)
    for config in recipes:
        recipe, *modes = config.split(":")
        q8, sq, k8, _, vt8, skv = quantize_qkv(q.detach(), k.detach(), v.detach(),
                                               qk_nvfp4=recipe == "nvfp4_fp8")
        fp8 = {"sq": sq, "skv": skv, "vt": vt8, "qk_bf16": recipe == "nvfp4_fp8"}
        ref = None
        for kernel in ["triton"] + (modes or ["gluon"]):
            env = ({"FLAMIA_FWD_KERNEL": kernel} if kernel in ("triton", "gluon") else
                   {"FLAMIA_FWD_KERNEL": "gluon", "FLAMIA_GLUON_FWD8": kernel})
            with mock.patch.dict(os.environ, env):
                try:
                    plan = batch_plan(cu, q.shape[0], d, fp8=True)
                    fn = lambda: K.attention_fwd(q8, k8, None, plan.seg_start, plan.order_fwd,
                                                 d ** -0.5, fp8=fp8)
                    o, lse = fn()
                    ref = ref or (o, lse)
                    rel = ((o.float() - ref[0].float()).norm() / ref[0].float().norm()).item()
                    same = torch.equal(o, ref[0]) and torch.equal(lse, ref[1])
                    ms = do_bench(fn, warmup=25, rep=100, return_mode="median")
                    kms = kernel_ms(fn)
                    print(f"| {dist} | {recipe} {kernel} | {rel:.1e} ({'bitwise' if same else 'differs'}) "
                          f"| {ms:.3f} | {kms:.3f} | {host_us(fn):.0f} | {flops / kms / 1e9:.0f} |",
                          flush=True)
                except Exception as exc:  # one failing variant must not hide the others
                    print(f"| {dist} | {recipe} {kernel} | {type(exc).__name__}: "
                          f"{str(exc)[:80]} | | | | |", flush=True)


def dkdv8_rows(dist, recipes, d):
    """--kernel dkdv8: the FP8 backward (dO quantization and token-major copies included) with
    the triton dK/dV kernels (split: dV-only and dK-only, the default; fused) against the Gluon
    FP8 dK/dV kernel (FLAMIA_DKDV_KERNEL=gluon) on one workload; "kernel ms" counts the dK/dV
    kernels only, "bitwise" compares dQ, dK, dV with the split kernels'."""
    from triton.testing import do_bench

    from flamia import ops

    lengths, q, k, v, do, cu = workload_inputs(dist, 4, 8192, 16, 16, d)
    q, k, v, do = q.detach(), k.detach(), v.detach(), do.detach()
    flops = causal_flops(lengths, 16, d)
    scale = d ** -0.5
    for config in recipes:
        recipe, *slots = config.split(":")
        ref = None
        for name, env in [("triton split", {"FLAMIA_DKDV_KERNEL": "triton"}),
                          ("triton fused", {"FLAMIA_DKDV_KERNEL": "triton",
                                            "FLAMIA_FP8_DKDV": "fused"})] + [
                (f"gluon {s}", {"FLAMIA_DKDV_KERNEL": "gluon", "FLAMIA_GLUON_DKDV8": s})
                for s in slots or ["2"]]:
            with mock.patch.dict(os.environ, env):
                try:
                    plan = batch_plan(cu, q.shape[0], d, fp8=True)
                    saved = ops._fwd_fp8(q, k, v, plan.seg_start, plan.seg_end, plan.order_fwd,
                                         plan.order_dkdv, plan.order_dq, scale, recipe)
                    fn = lambda: ops._bwd_fp8(do, *saved, plan.seg_start, plan.seg_end,
                                              plan.order_dkdv, plan.order_dq, scale, recipe)
                    outs = fn()
                    ref = ref or outs
                    rel = ((outs[1].float() - ref[1].float()).norm() / ref[1].float().norm()).item()
                    same = all(torch.equal(a, b) for a, b in zip(outs, ref))
                    ms = do_bench(fn, warmup=25, rep=100, return_mode="median")
                    kms = kernel_ms(fn, name="dkdv")
                    # dK/dV: 4 matmuls of half the forward's size (the split kernels run 5)
                    print(f"| {dist} | {recipe} {name} | {rel:.1e} "
                          f"({'bitwise' if same else 'differs'}) | {ms:.3f} | {kms:.3f} | "
                          f"{host_us(fn):.0f} | {2 * flops / kms / 1e9:.0f} |", flush=True)
                except Exception as exc:  # one failing variant must not hide the others
                    print(f"| {dist} | {recipe} {name} | {type(exc).__name__}: "
                          f"{str(exc)[:80]} | | | | |", flush=True)


def main(argv=None):
    from triton.testing import do_bench

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--kernel", choices=("fwd", "dkdv", "dq", "fwd8", "dkdv8"), default="fwd")
    ap.add_argument("--configs", nargs="+")
    ap.add_argument("--dists", nargs="+", default=["one_doc", "lognormal_1k", "u32_1024"])
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--cprofile", action="store_true",
                    help="also cProfile 50 calls of the first Gluon config (host path)")
    args = ap.parse_args(argv)
    fwd = args.kernel == "fwd"
    configs = args.configs or {"fwd": DEFAULT_CONFIGS, "dkdv": DEFAULT_DKDV_CONFIGS,
                               "dq": ["plain", "ws"], "fwd8": ["mxfp8"],
                               "dkdv8": ["mxfp8"]}[args.kernel]
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"{time.strftime('%Y-%m-%d %H:%M')}")
    what = {"fwd": "O", "fwd8": "O", "dkdv8": "dK"}.get(args.kernel, "dQ, dK, dV")
    print(f"| workload | {args.kernel} | {what} rel diff to triton | "
          "ms (do_bench) | kernel ms | host us | TFLOP/s (kernel) |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for dist in args.dists:
        if args.kernel in ("fwd8", "dkdv8"):
            (fwd8_rows if args.kernel == "fwd8" else dkdv8_rows)(dist, configs, args.d)
            continue
        lengths, q, k, v, do, cu = workload_inputs(dist, 4, 8192, 16, 16, args.d)
        q, k, v, do = q.detach(), k.detach(), v.detach(), do.detach()
        flops = causal_flops(lengths, 16, args.d)  # the forward's; dK/dV: 2x (4 matmuls)
        scale = args.d ** -0.5
        env_name, knob = {"fwd": ("FLAMIA_FWD_KERNEL", "FLAMIA_GLUON_FWD"),
                          "dkdv": ("FLAMIA_DKDV_KERNEL", "FLAMIA_GLUON_DKDV"),
                          "dq": ("FLAMIA_DQ_KERNEL", "FLAMIA_GLUON_DQ")}[args.kernel]
        variants = [("triton", {env_name: "triton"})] + [
            (c if c.startswith("triton") else f"gluon {c}",
             _dkdv_env(c) if args.kernel == "dkdv" else {env_name: "gluon", knob: c})
            for c in configs]
        # fwd and dkdv variants: the triton dQ kernel in every row (dq: the variable)
        base = {} if args.kernel == "dq" else {"FLAMIA_DQ_KERNEL": "triton"}
        ref = None
        for name, env in variants:
            with mock.patch.dict(os.environ, {**base, **env}):
                try:
                    plan = batch_plan(cu, q.shape[0], args.d)
                    if fwd:
                        fn = lambda: K.attention_fwd(q, k, v, plan.seg_start, plan.order_fwd,
                                                     scale)
                        kernel_flops = flops
                    else:
                        o, lse = K.attention_fwd(q, k, v, plan.seg_start, plan.order_fwd, scale)
                        fn = lambda: K.attention_bwd(do, q, k, v, o, lse, plan.seg_start,
                                                     plan.seg_end, plan.order_dkdv,
                                                     plan.order_dq, scale)
                        # matmuls of half the forward's size: dK/dV 4 (5 with fused dQ), dQ 3
                        fused = env.get("FLAMIA_DQ") == "fused"
                        kernel_flops = ((2.5 if fused else 2) if args.kernel == "dkdv"
                                        else 1.5) * flops
                    outs = [t.float() for t in (fn()[:1] if fwd else fn())]
                    if ref is None:
                        ref = outs
                    rel = ", ".join(f"{((a - b).norm() / b.norm()).item():.1e}"
                                    for a, b in zip(outs, ref))
                    ms = do_bench(fn, warmup=25, rep=100, return_mode="median")
                    kms = kernel_ms(fn, name={"fwd": "", "dkdv": "dkdv", "dq": "bwd_dq"}[
                        args.kernel])
                    hus = host_us(fn)
                    print(f"| {dist} | {name} | {rel} | {ms:.3f} | {kms:.3f} | {hus:.0f} | "
                          f"{kernel_flops / kms / 1e9:.0f} |", flush=True)
                except Exception as exc:  # one failing variant must not hide the others
                    print(f"| {dist} | {name} | {type(exc).__name__}: {str(exc)[:80]} | | | | |",
                          flush=True)
        if args.cprofile and fwd and dist == args.dists[0]:
            import cProfile
            import pstats
            env = {"FLAMIA_FWD_KERNEL": "gluon", "FLAMIA_GLUON_FWD": configs[0]}
            with mock.patch.dict(os.environ, env), cProfile.Profile() as prof:
                plan = batch_plan(cu, q.shape[0], args.d)
                for _ in range(50):
                    K.attention_fwd(q, k, v, plan.seg_start, plan.order_fwd, scale)
            torch.cuda.synchronize()
            pstats.Stats(prof).sort_stats("tottime").print_stats(14)


if __name__ == "__main__":
    main()
