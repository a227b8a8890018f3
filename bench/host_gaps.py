"""Where the host shows in a timed fwd+bwd: the GPU's idle time before each kernel, from a
torch.profiler trace of calls issued as do_bench issues them (L2 flushed by a fill before each
call, no synchronization between calls).

A kernel that waits for the host starts after the previous kernel has ended; that gap is time
the GPU spent waiting for the launch, and it adds to the timed call. A provider whose kernels
sum to less than a baseline's can still time slower if its gaps make up the difference (U(32,
1024): about 1.2 ms of kernels against 1.0-1.6 ms of host per flamia-bf16 fwd+bwd).

    PYTHONPATH=$PWD python -m bench.host_gaps [--dists u32_1024] [--providers flamia-bf16 ...]

Prints, per provider: the call's span on the GPU (the flush's end, where do_bench's start event
lies, to the last kernel's end), its kernels' sum, and per kernel name the median gap before it
and its median duration (microseconds).
"""

from __future__ import annotations

import argparse
import statistics

import torch

from bench.attention import PROVIDERS, fwd_bwd_once, provider_env, workload_inputs


def gpu_timeline(fn, q, k, v, do, calls=30, warm=30):
    """[(name, start us, end us)] of the GPU kernels of ``calls`` fwd+bwd calls, each after an
    L2 flush (a fill kernel, named "flush"), back to back."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    flush = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    for _ in range(warm):
        flush.zero_()
        fwd_bwd_once(fn, q, k, v, do)
    torch.cuda.synchronize()
    # CUDA activity only: recording the CPU ops too would slow the host and widen the gaps
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            flush.zero_()
            fwd_bwd_once(fn, q, k, v, do)
        torch.cuda.synchronize()
    kernels = []
    for e in prof.events():
        if e.device_type == DeviceType.CUDA and e.time_range.end > e.time_range.start:
            kernels.append([e.name, e.time_range.start, e.time_range.end])
    kernels.sort(key=lambda x: x[1])
    big = max(end - start for name, start, end in kernels if "Fill" in name)
    for kern in kernels:  # the flush: the longest fill (the work queues' fills are tiny)
        if "Fill" in kern[0] and kern[2] - kern[1] > 0.5 * big:
            kern[0] = "flush"
    return kernels


def summarize(kernels):
    """(span us, busy us, {name: (median gap before, median duration)}) per call (medians),
    a call being the kernels between two flushes."""
    calls, cur = [], None
    for name, start, end in kernels:
        if name == "flush":
            cur = []
            calls.append(cur)
            prev_end = end
            continue
        if cur is None:
            continue
        cur.append((name, start - prev_end, end - start, start, end))
        prev_end = end
    calls = [c for c in calls if c]
    spans = [c[-1][4] - (c[0][3] - c[0][1]) for c in calls]  # from the flush's end, as timed
    busy = [sum(x[2] for x in c) for c in calls]
    per = {}
    for c in calls:
        for name, gap, dur, *_ in c:
            per.setdefault(name, ([], []))
            per[name][0].append(gap)
            per[name][1].append(dur)
    return (statistics.median(spans), statistics.median(busy),
            {n: (statistics.median(g), statistics.median(d)) for n, (g, d) in per.items()})


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--dists", nargs="+", default=["u32_1024"])
    ap.add_argument("--providers", nargs="+", default=["flamia-bf16", "cudnn-thd"],
                    choices=list(PROVIDERS))
    ap.add_argument("--calls", type=int, default=30)
    args = ap.parse_args(argv)
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}")
    for dist in args.dists:
        lengths, q, k, v, do, cu = workload_inputs(dist, 4, 8192, 16, 16, 128)
        for name in args.providers:
            with provider_env(name):
                fn = PROVIDERS[name](q, k, v, cu, lengths, 8192)
                span, busy, per = summarize(gpu_timeline(fn, q, k, v, do, args.calls))
            print(f"## {dist} {name}: span {span:.0f} us, kernels {busy:.0f} us, "
                  f"idle {span - busy:.0f} us (medians per call)")
            for kname, (gap, dur) in per.items():
                print(f"  gap {gap:7.1f}  kernel {dur:7.1f}  {kname[:90]}")


if __name__ == "__main__":
    main()
