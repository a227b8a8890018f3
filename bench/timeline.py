"""Where a fwd+bwd call's GPU sits idle: the kernel timeline of flamia-bf16 (torch.profiler), for
forward settings side by side, in one process on the GPU:

    python -m bench.timeline [--dist one_doc] [--d 64] [--configs default 128,128,8,2,ws]
                             [--warm 300]

bench.attention times fwd+bwd with do_bench and, with --profile, sums the kernels' GPU time; with
the persistent forward the timed call has been 0.1-0.3 ms above that sum (one document, D = 64,
H100 2026-12-06: 5.066 vs 4.737 ms), with the warp-specialized one 0.02-0.09 ms. Here each
config (FLAMIA_GLUON_FWD; "default": unset) runs a few calls as do_bench does (an L2 flush, then
the call), and prints per call the GPU span, the kernels' sum and the idle time between them,
the largest gaps with the kernels on either side, and the host's CUDA runtime calls that took
longer than 50 us (a synchronization or an allocation would show there). Found (H100,
2026-12-06, bench/results/timeline_sustained_20261206_H100.txt): no idle time between kernels;
after 300 calls every kernel ran longer, most for the setting profiled second, so the gap was
the GPU's heat (bench.attention now times providers in alternating rounds). "default" is the
persistent forward since then; the former default is 128,128,8,2,ws.
"""

from __future__ import annotations

import argparse
import os

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, record_function

from bench.attention import fwd_bwd_once, prep_flamia, workload_inputs


def _timeline(fn, q, k, v, do, calls: int, warm: int):
    flush = torch.empty(256 * 2**20 // 4, dtype=torch.int32, device="cuda")

    def fwd_bwd():
        flush.zero_()
        fwd_bwd_once(fn, q, k, v, do)

    for _ in range(warm):
        fwd_bwd()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for i in range(calls):
            with record_function(f"call {i}"):
                fwd_bwd()
        torch.cuda.synchronize()
    events = list(prof.events())
    # (record_function's ranges also appear on the GPU side, named "call i": not kernels)
    kernels = sorted((e for e in events if e.device_type == DeviceType.CUDA
                      and not e.name.startswith("call ")),
                     key=lambda e: e.time_range.start)
    runtime = [e for e in events if e.device_type == DeviceType.CPU
               and e.name.startswith(("cuda", "cu")) and e.time_range.elapsed_us() > 50]
    return kernels, runtime


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dist", default="one_doc")
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--configs", nargs="+", default=["default", "128,128,8,2,ws"])
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--warm", type=int, default=3,
                    help="calls before the profiled ones (300: do_bench's sustained load)")
    args = ap.parse_args(argv)
    lengths, q, k, v, do, cu = workload_inputs(args.dist, 4, 8192, 16, 16, args.d)
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, {args.dist}, D = {args.d}")
    for config in args.configs:
        if config == "default":
            os.environ.pop("FLAMIA_GLUON_FWD", None)
        else:
            os.environ["FLAMIA_GLUON_FWD"] = config
        fn = prep_flamia(q, k, v, cu, lengths, 8192)
        kernels, runtime = _timeline(fn, q, k, v, do, args.calls, args.warm)
        # The L2 flushes: the fills of 256 MB (tens of us; the work queue's fill takes ~2 us)
        flush = [i for i, e in enumerate(kernels)
                 if "fill" in e.name.lower() and e.time_range.elapsed_us() > 30]
        flushes = {id(kernels[i]) for i in flush}
        print(f"\n## {config}: {len(kernels)} kernels in {args.calls} calls")
        # Each call: from the kernel after its L2 flush to the next flush (or the end).
        starts = [i + 1 for i in flush] or [0]
        for c, s in enumerate(starts):
            end = starts[c + 1] - 1 if c + 1 < len(starts) else len(kernels)
            ks = kernels[s:end]
            if not ks:
                continue
            span = (ks[-1].time_range.end - ks[0].time_range.start) / 1e3
            busy = sum(e.time_range.elapsed_us() for e in ks) / 1e3
            print(f"call {c}: span {span:.3f} ms, kernels {busy:.3f} ms, idle {span - busy:.3f} ms")
        gaps = []
        for a, b in zip(kernels, kernels[1:]):
            gap = b.time_range.start - a.time_range.end
            if id(b) not in flushes:  # not the wait for the next call
                gaps.append((gap, a.name[:40], b.name[:40]))
        print("largest gaps (us): " + "; ".join(f"{g:.0f} {a} -> {b}"
                                                for g, a, b in sorted(gaps, reverse=True)[:6]))
        for e in sorted(runtime, key=lambda e: -e.time_range.elapsed_us())[:8]:
            print(f"host {e.name}: {e.time_range.elapsed_us():.0f} us")
        first = starts[0]
        for e in kernels[first:starts[1] - 1 if len(starts) > 1 else len(kernels)]:
            print(f"  {e.time_range.start - kernels[first].time_range.start:9.0f} us "
                  f"{e.time_range.elapsed_us():7.0f} us {e.name[:60]}")


if __name__ == "__main__":
    main()
