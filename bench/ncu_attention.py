"""One fwd+bwd of flamia's attention per recipe inside a CUDA profiler range, for Nsight Compute.

    ncu --profile-from-start off --clock-control none --kernel-name regex:_attn_ \
        --section WarpStateStats ... python -m bench.ncu_attention --recipes bf16 mxfp8

Each recipe runs twice first (compile, autotune) outside the range; only the third call's kernels
are profiled. The workload is bench.attention's (same lengths and inputs). After ncu has written
a report (``--export``), ``--stalls REPORT`` prints, per kernel, the SASS instructions with the
most warp-stall samples (the source page of the report; run where ncu is installed).
"""

from __future__ import annotations

import argparse
import csv
import io
import subprocess

import torch

import flamia
from bench.attention import packed_lengths


def profile_step(recipes, dist="lognormal_1k", rows=4, L=8192, heads=16, d=128, seed=0):
    lengths = packed_lengths(dist, rows, L, seed)
    total = rows * L
    gen = torch.Generator(device="cuda").manual_seed(seed)
    mk = lambda: torch.randn(total, heads, d, device="cuda", dtype=torch.bfloat16, generator=gen)
    q, k, v = (mk().requires_grad_() for _ in range(3))
    do = mk()
    cu = torch.zeros(len(lengths) + 1, dtype=torch.int32, device="cuda")
    cu[1:] = torch.cumsum(torch.tensor(lengths, device="cuda"), 0)

    def step(recipe):
        o = flamia.attention(q, k, v, cu, max(lengths), recipe=recipe, impl="triton")
        torch.autograd.grad(o, (q, k, v), do)

    for recipe in recipes:
        step(recipe)
        step(recipe)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for recipe in recipes:
        step(recipe)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


def top_stalls(report: str, top: int = 25, raw_dir: str | None = None) -> str:
    """Per profiled kernel, the SASS lines with the most warp-stall samples (ncu's source page)."""
    out = []
    for i in range(16):
        text = subprocess.run(["ncu", "-i", report, "--page", "source", "--csv", "--print-source",
                               "sass", "--launch-skip", str(i), "--launch-count", "1"],
                              capture_output=True, text=True).stdout
        if raw_dir:
            with open(f"{raw_dir}/source_{i}.csv", "w") as f:
                f.write(text)
        lines = text.splitlines()
        start = next((j for j, line in enumerate(lines) if "Source" in line and "Address" in line),
                     None)
        if start is None:
            break
        rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
        head, body = rows[0], rows[1:]
        col = next((j for j, h in enumerate(head) if h.startswith("Warp Stall Sampling (All")), None)
        src = head.index("Source")
        if col is None:
            out.append(f"## kernel {i}: no stall column in {head[:10]}")
            continue

        def samples(r):
            try:
                return float(r[col])
            except (ValueError, IndexError):
                return 0.0

        total = sum(samples(r) for r in body) or 1.0
        title = " ".join(lines[:start])[:160]
        out.append(f"## kernel {i}: {int(total)} stall samples; {title}")
        for r in sorted(body, key=samples, reverse=True)[:top]:
            out.append(f"{100 * samples(r) / total:5.1f}%  {r[src][:100]}")
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--recipes", nargs="+", default=["bf16", "mxfp8"])
    ap.add_argument("--dist", default="lognormal_1k")
    ap.add_argument("--stalls", metavar="REPORT", help="print the stall table of an ncu report")
    ap.add_argument("--raw-dir", help="with --stalls: also write each kernel's source page here")
    args = ap.parse_args(argv)
    if args.stalls:
        print(top_stalls(args.stalls, raw_dir=args.raw_dir))
    else:
        profile_step(args.recipes, args.dist)


if __name__ == "__main__":
    main()
