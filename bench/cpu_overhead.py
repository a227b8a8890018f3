"""Host (CPU) time per attention call against its GPU time: when the host needs longer to issue
a fwd+bwd than the GPU needs to run it, the GPU idles between kernels and the benchmark's times
include those gaps (bench/attention.py --profile shows them as timed ms above the kernel sum).

    PYTHONPATH=$PWD python -m bench.cpu_overhead [--recipes bf16 mxfp8] [--dists u32_1024]

Per recipe and workload: host ms to issue one fwd+bwd (50 calls queued without waiting, the GPU
still busy with earlier ones), GPU ms per call (CUDA events over the same 50 calls), and the
functions that take the host's time (cProfile, 20 calls, by own time).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time

import torch

from bench.attention import prep_flamia, workload_inputs


def host_and_gpu_ms(step, n=50):
    for _ in range(5):
        step()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    t0 = time.perf_counter()
    for _ in range(n):
        step()
    host = (time.perf_counter() - t0) * 1e3 / n
    end.record()
    torch.cuda.synchronize()
    return host, start.elapsed_time(end) / n


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--recipes", nargs="+", default=["bf16", "mxfp8"])
    ap.add_argument("--dists", nargs="+", default=["u32_1024", "lognormal_1k"])
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args(argv)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}")
    for dist in args.dists:
        lengths, q, k, v, do, cu = workload_inputs(dist, 4, 8192, 16, 16, 128)
        for recipe in args.recipes:
            fn = prep_flamia(q, k, v, cu, lengths, 8192, recipe=recipe)

            def step():  # no .grad accumulation kernels: the gradients are returned
                torch.autograd.grad(fn(), (q, k, v), do)

            host, gpu = host_and_gpu_ms(step)
            print(f"{dist} {recipe}: host {host:.3f} ms per fwd+bwd, GPU {gpu:.3f} ms", flush=True)
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(20):
                step()
            prof.disable()
            torch.cuda.synchronize()
            out = io.StringIO()
            pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(args.top)
            print("\n".join(line for line in out.getvalue().splitlines() if line.strip())[:6000])


if __name__ == "__main__":
    main()
