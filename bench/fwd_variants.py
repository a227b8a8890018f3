"""The BF16 forward alone, triton kernel against Gluon configurations (FLAMIA_GLUON_FWD=M,N,W,S),
on bench.attention's workloads, in one process on the GPU:

    python -m bench.fwd_variants [--configs 128,128,8,2 64,64,4,2] [--dists one_doc u32_1024]

Per variant and workload: O's relative difference to the triton forward (a check, not a
precision measure), the median time of one forward call (do_bench, host work included), the
GPU time of its kernel (torch.profiler) and the host time of one call (50 calls issued
back to back, timed on the host before synchronizing: the launch path's cost).
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

DEFAULT_CONFIGS = ["128,128,8,2", "64,64,4,2", "64,64,4,3", "64,128,4,2", "128,64,8,3"]


def kernel_ms(fn, calls=20):
    """Mean GPU time of the kernels one call launches (torch.profiler)."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    total_us = sum(e.device_time_total for e in prof.key_averages()
                   if e.device_type == torch.autograd.DeviceType.CUDA)
    return total_us / 1e3 / calls


def host_us(fn, calls=50):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / calls * 1e6


def main(argv=None):
    from triton.testing import do_bench

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--configs", nargs="+", default=DEFAULT_CONFIGS)
    ap.add_argument("--dists", nargs="+", default=["one_doc", "lognormal_1k", "u32_1024"])
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--cprofile", action="store_true",
                    help="also cProfile 50 calls of the first Gluon config (host path)")
    args = ap.parse_args(argv)
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"{time.strftime('%Y-%m-%d %H:%M')}")
    print("| workload | forward | O rel diff to triton | ms (do_bench) | kernel ms | host us | "
          "TFLOP/s (kernel) |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for dist in args.dists:
        lengths, q, k, v, _, cu = workload_inputs(dist, 4, 8192, 16, 16, args.d)
        q, k, v = q.detach(), k.detach(), v.detach()
        flops = causal_flops(lengths, 16, args.d)  # the forward's
        scale = args.d ** -0.5
        variants = [("triton", {"FLAMIA_FWD_KERNEL": "triton"})] + [
            (f"gluon {c}", {"FLAMIA_FWD_KERNEL": "gluon", "FLAMIA_GLUON_FWD": c})
            for c in args.configs]
        o_ref = None
        for name, env in variants:
            with mock.patch.dict(os.environ, env):
                try:
                    plan = batch_plan(cu, q.shape[0], args.d)
                    fn = lambda: K.attention_fwd(q, k, v, plan.seg_start, plan.order_fwd, scale)
                    o = fn()[0]
                    if o_ref is None:
                        o_ref = o.float()
                    rel = ((o.float() - o_ref).norm() / o_ref.norm()).item()
                    ms = do_bench(fn, warmup=25, rep=100, return_mode="median")
                    kms = kernel_ms(fn)
                    hus = host_us(fn)
                    print(f"| {dist} | {name} | {rel:.1e} | {ms:.3f} | {kms:.3f} | {hus:.0f} | "
                          f"{flops / kms / 1e9:.0f} |", flush=True)
                except Exception as exc:  # one failing variant must not hide the others
                    print(f"| {dist} | {name} | {type(exc).__name__}: {str(exc)[:80]} | | | | |",
                          flush=True)
        if args.cprofile and dist == args.dists[0]:
            import cProfile
            import pstats
            env = {"FLAMIA_FWD_KERNEL": "gluon", "FLAMIA_GLUON_FWD": args.configs[0]}
            with mock.patch.dict(os.environ, env), cProfile.Profile() as prof:
                plan = batch_plan(cu, q.shape[0], args.d)
                for _ in range(50):
                    K.attention_fwd(q, k, v, plan.seg_start, plan.order_fwd, scale)
            torch.cuda.synchronize()
            pstats.Stats(prof).sort_stats("tottime").print_stats(14)


if __name__ == "__main__":
    main()
