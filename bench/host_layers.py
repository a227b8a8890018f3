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

--ab ENV=A,B: flamia fwd+bwd under each value of ENV in alternating rounds of one process,
median per value (e.g. --ab FLAMIA_LAUNCH=jit,cached).

--cpu: the same paths on CPU tensors with every kernel stubbed (recorded, not run; Hopper faked)
and the big outputs served from a pool, as CUDA's caching allocator serves them: the host time
of this project's own Python, without triton's launches, CUDA allocations and fills.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
from unittest import mock

import torch

import flamia
from bench.attention import packed_lengths, workload_inputs
from bench.gluon_report import LaunchRecorder
from flamia import interface
from flamia.kernels import launch, quantize
from flamia.kernels import attention as K
from flamia.kernels import attention_hopper as H
from flamia.ops import cached_batch_plan


def host_us(fn, calls=200, sync=torch.cuda.synchronize):
    for _ in range(10):
        fn()
    sync()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    host = (time.perf_counter() - t0) / calls * 1e6
    sync()
    return host


@contextlib.contextmanager
def stubbed_hopper():
    """CPU tensors take the Hopper path: capability faked, every kernel of kernels.attention,
    attention_hopper and quantize recorded instead of launched, and kernels.attention's output
    allocations served from a pool. Yields the recorded launches, (kernel name, grid, args,
    kwargs), the last 8 or fewer."""
    launches = []
    pool = {}

    def pooled(shape, dtype=None, device=None):
        # as a caching allocator: a pooled tensor that nothing else holds any more, or a new one
        tensors = pool.setdefault((tuple(shape), dtype), [])
        for t in tensors:
            if sys.getrefcount(t) == 3:  # the pool's list, the loop variable, the argument
                return t
        tensors.append(torch.empty(shape, dtype=dtype, device=device))
        return tensors[-1]

    class Recorder(LaunchRecorder):
        def __getitem__(self, grid):
            del launches[:-8]
            return super().__getitem__(grid)

    patches = [mock.patch.object(K, "INTERPRET", False),  # the interpreter tier sets it
               mock.patch.object(K, "cuda_major", lambda device=None: 9),
               mock.patch.object(H, "cuda_major", lambda device=None: 9),
               mock.patch.object(H, "sm_count", lambda device: 132),
               mock.patch.object(interface, "_triton_available", lambda device: True),
               mock.patch.object(K, "empty", pooled)]
    for module in (K, H, quantize):
        patches += [mock.patch.object(module, name, Recorder(name, launches))
                    for name in dir(module) if name.startswith("_") and name.endswith("_kernel")]
    with contextlib.ExitStack() as stack:
        for p in patches:
            stack.enter_context(p)
        yield launches


def cpu_inputs(dist, rows, L, hq, hkv, d, seed=0):
    """workload_inputs on CPU tensors (zeros: the kernels are stubbed)."""
    lengths = packed_lengths(dist, rows, L, seed)
    total = rows * L
    mk = lambda h: torch.zeros(total, h, d, dtype=torch.bfloat16)
    q, k, v = mk(hq).requires_grad_(), mk(hkv).requires_grad_(), mk(hkv).requires_grad_()
    do = mk(hq)
    cu = torch.zeros(len(lengths) + 1, dtype=torch.int32)
    cu[1:] = torch.cumsum(torch.tensor(lengths), 0)
    return lengths, q, k, v, do, cu


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--dists", nargs="+", default=["u32_1024"])
    ap.add_argument("--cprofile", nargs="*", default=[],
                    help="paths to cProfile (100 calls each, top functions by own time)")
    ap.add_argument("--trace", action="store_true",
                    help="also torch.profiler's host-side events of 10 flamia fwd+bwd calls")
    ap.add_argument("--cpu", action="store_true",
                    help="CPU tensors, kernels stubbed, outputs pooled: this project's Python only")
    ap.add_argument("--ab", metavar="ENV=A,B[,...]",
                    help="also flamia fwd+bwd under each value of an environment variable, in "
                         "alternating rounds in this one process (host time differs between "
                         "processes by as much as the change being measured)")
    ap.add_argument("--rounds", type=int, default=8, help="rounds of --ab")
    args = ap.parse_args(argv)
    if args.ab is not None:
        name, _, values = args.ab.partition("=")
        if not name or len(values.split(",")) < 2:
            ap.error(f"--ab {args.ab!r}: expected ENV=A,B[,...], e.g. FLAMIA_LAUNCH=jit,cached")
        args.ab = (name, values.split(","))
    if args.cpu and args.trace:
        ap.error("--trace needs the GPU (its CUDA events); leave out --cpu or --trace")
    with stubbed_hopper() if args.cpu else contextlib.nullcontext():
        run(args)


def run(args):
    device = "CPU, kernels stubbed" if args.cpu else torch.cuda.get_device_name()
    sync = (lambda: None) if args.cpu else torch.cuda.synchronize
    print(f"# {device}, torch {torch.__version__}, {time.strftime('%Y-%m-%d %H:%M')}")
    print("| workload | path | host us per call |")
    print("|---|---|---:|")
    for dist in args.dists:
        inputs = cpu_inputs if args.cpu else workload_inputs
        lengths, q, k, v, do, cu = inputs(dist, 4, 8192, 16, 16, 128)
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
            print(f"| {dist} | {name} | {host_us(fn, sync=sync):.0f} |", flush=True)
        # which launch ran: a cached launch that silently fell back to triton's looks the same
        print(f"# FLAMIA_LAUNCH={launch.launch_mode()}: {launch.cached_launches} launches went "
              "straight to a compiled kernel's launcher")
        if args.ab is not None:
            env, values = args.ab
            times = {value: [] for value in values}
            for r in range(args.rounds):
                for value in (values if r % 2 == 0 else values[::-1]):
                    with mock.patch.dict(os.environ, {env: value}):
                        times[value].append(host_us(model_step, sync=sync))
            for value, ts in times.items():
                print(f"| {dist} | flamia fwd+bwd, {env}={value} | {statistics.median(ts):.0f} "
                      f"(rounds {', '.join(f'{t:.0f}' for t in ts)}) |")
        for name in args.cprofile:
            import cProfile
            import io
            import pstats
            with cProfile.Profile() as prof:
                for _ in range(100):
                    paths[name]()
            sync()
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
