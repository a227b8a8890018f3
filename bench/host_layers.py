"""Host time of one BF16 forward and backward, layer by layer, on the GPU: where the host path
between ``flamia.attention`` and the kernel launches spends its time. On short workloads it is
not hidden: bench/attention.py times each call from a recorded event, and the GPU waits for the
first kernel as long as the host takes to launch it.

    PYTHONPATH=$PWD python -m bench.host_layers [--dists u32_1024]

Each path is timed as host microseconds per call over 200 calls issued back to back (the GPU
still busy with earlier ones, so the host never waits for it):
  launch fwd / launch dq / ...  one Gluon or triton kernel launch with preallocated outputs
  kernels fwd / kernels bwd     kernels.attention.attention_fwd / attention_bwd (allocations,
                                the delta kernel, the three backward launches)
  op fwd / op bwd               torch.ops.flamia.attention_fwd / attention_bwd (custom-op dispatch)
  flamia fwd                    flamia.attention (validation, plan cache, autograd recording)
  flamia fwd+bwd                flamia.attention and torch.autograd.grad
"""

from __future__ import annotations

import argparse
import time

import torch

import flamia
from bench.attention import workload_inputs
from flamia.kernels import attention as K
from flamia.kernels import attention_hopper as H
from flamia.ops import cached_batch_plan


def host_us(fn, calls=200):
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    host = (time.perf_counter() - t0) / calls * 1e6
    torch.cuda.synchronize()
    return host


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--dists", nargs="+", default=["u32_1024"])
    ap.add_argument("--cprofile", nargs="*", default=[],
                    help="paths to cProfile (100 calls each, top functions by own time)")
    ap.add_argument("--trace", action="store_true",
                    help="also torch.profiler's host-side events of 10 flamia fwd+bwd calls")
    args = ap.parse_args(argv)
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"{time.strftime('%Y-%m-%d %H:%M')}")
    print("| workload | path | host us per call |")
    print("|---|---|---:|")
    for dist in args.dists:
        lengths, q, k, v, do, cu = workload_inputs(dist, 4, 8192, 16, 16, 128)
        total, hq, d = q.shape
        scale = d ** -0.5
        qd, kd, vd = q.detach(), k.detach(), v.detach()
        plan = cached_batch_plan(cu, total, d)
        o, lse = K.attention_fwd(qd, kd, vd, plan.seg_start, plan.order_fwd, scale)
        delta = torch.empty_like(lse)
        dq, dk, dv = (torch.empty_like(t) for t in (qd, kd, vd))
        max_len = max(lengths)

        def model_step():
            out = flamia.attention(q, k, v, cu, max_len, recipe="bf16", impl="triton")
            torch.autograd.grad(out, (q, k, v), do)

        paths = {
            "launch fwd": lambda: H.attention_fwd_hopper(qd, kd, vd, plan.seg_start,
                                                         plan.order_fwd, scale, o, lse),
            "launch dq": lambda: H.attention_dq_hopper(qd, kd, vd, do, lse, delta,
                                                       plan.seg_start, plan.order_dq, scale, dq),
            "launch dkdv": lambda: H.attention_dkdv_hopper(
                qd, kd, vd, do, lse, delta, plan.seg_start, plan.seg_end, plan.order_dkdv,
                scale, dk, dv),
            "kernels fwd": lambda: K.attention_fwd(qd, kd, vd, plan.seg_start, plan.order_fwd,
                                                   scale),
            "kernels bwd": lambda: K.attention_bwd(do, qd, kd, vd, o, lse, plan.seg_start,
                                                   plan.seg_end, plan.order_dkdv, plan.order_dq,
                                                   scale),
            "op fwd": lambda: torch.ops.flamia.attention_fwd(
                qd, kd, vd, plan.seg_start, plan.seg_end, plan.order_fwd, plan.order_dkdv,
                plan.order_dq, scale, "bf16"),
            "op bwd": lambda: torch.ops.flamia.attention_bwd(
                do, qd, kd, vd, o, lse, plan.seg_start, plan.seg_end, plan.order_dkdv,
                plan.order_dq, scale, "bf16"),
            "flamia fwd": lambda: flamia.attention(q, k, v, cu, max_len, recipe="bf16",
                                                   impl="triton"),
            "flamia fwd+bwd": model_step,
        }
        for name, fn in paths.items():
            print(f"| {dist} | {name} | {host_us(fn):.0f} |", flush=True)
        for name in args.cprofile:
            import cProfile
            import io
            import pstats
            with cProfile.Profile() as prof:
                for _ in range(100):
                    paths[name]()
            torch.cuda.synchronize()
            out = io.StringIO()
            pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(22)
            print(f"### cProfile of {name}, 100 calls")
            print("\n".join(line for line in out.getvalue().splitlines() if line.strip()))
        if args.trace:
            acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
            with torch.profiler.profile(activities=acts) as prof:
                for _ in range(10):
                    model_step()
                torch.cuda.synchronize()
            print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))


if __name__ == "__main__":
    main()
