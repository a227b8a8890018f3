"""One fwd+bwd of flamia's attention per recipe inside a CUDA profiler range, for Nsight Compute.

    ncu --profile-from-start off --clock-control none --kernel-name regex:_attn_ \
        --section WarpStateStats ... python -m bench.ncu_attention --recipes bf16 mxfp8

Each recipe runs twice first (compile, autotune) outside the range; only the third call's kernels
are profiled. The workload is bench.attention's (same lengths and inputs). ``--providers`` names
bench.attention providers instead (each under its PROVIDER_ENV), e.g. ``flamia-bf16 cudnn-thd``:
cuDNN's kernels then show their own launch grid, registers and stalls beside flamia's. After ncu has written
a report (``--export``), ``--stalls REPORT`` prints, per kernel, the stall reasons, the
instruction mix and the SASS lines with the most warp-stall samples (the report's source page;
run where ncu is installed; ``--raw-dir`` keeps the pages, ``--csv-dir`` summarizes kept pages
anywhere). Used by ``bash bench/h200_session.sh profile``.
"""

from __future__ import annotations

import argparse
import collections
import csv
import io
import os
import re
import subprocess

import torch

from bench.attention import PROVIDERS, fwd_bwd_once, provider_env, workload_inputs

# The bench.attention provider of each recipe: flamia.attention(recipe=..., impl="triton").
RECIPE_PROVIDERS = {"bf16": "flamia-bf16", "mxfp8": "flamia-mxfp8",
                    "nvfp4_fp8": "flamia-nvfp4_fp8 (emulated NVFP4)"}


def profile_step(recipes, dist="lognormal_1k", rows=4, L=8192, heads=16, d=128, seed=0):
    """One fwd+bwd per recipe in the profiled range: profile_providers on their providers."""
    unknown = [r for r in recipes if r not in RECIPE_PROVIDERS]
    if unknown:
        raise ValueError(f"recipes {unknown}; accepted: {list(RECIPE_PROVIDERS)}")
    profile_providers([RECIPE_PROVIDERS[r] for r in recipes], dist, rows, L, heads, d, seed)


def profile_providers(names, dist="lognormal_1k", rows=4, L=8192, heads=16, d=128, seed=0):
    """bench.attention providers (each under its PROVIDER_ENV), each run twice to compile and
    autotune, then one fwd+bwd of each inside the profiled range."""
    lengths, q, k, v, do, cu = workload_inputs(dist, rows, L, heads, heads, d, seed)

    def step(name, fn):
        with provider_env(name):
            fwd_bwd_once(fn, q, k, v, do)

    fns = {}
    for name in names:
        with provider_env(name):
            fns[name] = PROVIDERS[name](q, k, v, cu, lengths, L)
        step(name, fns[name])
        step(name, fns[name])
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for name, fn in fns.items():
        step(name, fn)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


def source_page(report: str, index: int) -> str:
    """ncu's source page (SASS, per-instruction counters and stall samples) of one profiled
    kernel, as CSV text ('' past the last kernel)."""
    return subprocess.run(["ncu", "-i", report, "--page", "source", "--csv", "--print-source",
                           "sass", "--launch-skip", str(index), "--launch-count", "1"],
                          capture_output=True, text=True).stdout


def summarize_source(text: str, top: int = 25) -> str:
    """Stall reasons, instruction mix and the most-stalled SASS lines of one source page."""
    lines = text.splitlines()
    start = next((j for j, line in enumerate(lines) if "Source" in line and "Address" in line),
                 None)
    if start is None:
        return ""
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    head, body = rows[0], rows[1:]
    col = {h: j for j, h in enumerate(head)}

    def num(r, name):
        try:
            return float(r[col[name]])
        except (ValueError, IndexError, KeyError):
            return 0.0

    samples_col = next(h for h in head if h.startswith("Warp Stall Sampling (All"))
    reasons = [h for h in head if h.startswith("stall_") and "Not Issued" not in h]
    total = sum(num(r, samples_col) for r in body) or 1.0
    by_reason = collections.Counter({h[6:]: sum(num(r, h) for r in body) for h in reasons})
    executed = collections.Counter()
    for r in body:
        op = re.sub(r"^@!?U?P\w+\s+", "", r[col["Source"]].strip()).split(" ")[0].split(".")[0]
        executed[op] += num(r, "Instructions Executed")
    n_exec = sum(executed.values()) or 1.0
    name = lines[0].split(",")[1].strip('"') if lines and "," in lines[0] else "?"
    out = [f"## {name}: {int(total)} stall samples, {n_exec:.3g} warp instructions executed",
           "stall reasons: " + ", ".join(f"{k} {100 * v / total:.1f}%"
                                         for k, v in by_reason.most_common(10)),
           "instructions: " + ", ".join(f"{k} {100 * v / n_exec:.1f}%"
                                        for k, v in executed.most_common(12))]
    for r in sorted(body, key=lambda r: num(r, samples_col), reverse=True)[:top]:
        out.append(f"{100 * num(r, samples_col) / total:5.1f}%  {r[col['Source']].strip()[:90]}")
    return "\n".join(out)


def top_stalls(report: str | None = None, csv_dir: str | None = None, raw_dir: str | None = None,
               top: int = 25) -> str:
    """summarize_source for every kernel of an ncu report (or of source pages saved as
    csv_dir/source_<i>.csv); raw_dir: also save each page there."""
    out = []
    for i in range(64):
        if report:
            text = source_page(report, i)
        else:
            path = os.path.join(csv_dir, f"source_{i}.csv")
            text = open(path).read() if os.path.exists(path) else ""
        if raw_dir and text:
            with open(os.path.join(raw_dir, f"source_{i}.csv"), "w") as f:
                f.write(text)
        summary = summarize_source(text, top)
        if not summary:
            break
        out.append(summary)
    return "\n\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--recipes", nargs="+", default=["bf16", "mxfp8"])
    ap.add_argument("--providers", nargs="+",
                    help="bench.attention providers to profile instead of --recipes")
    ap.add_argument("--dist", default="lognormal_1k")
    ap.add_argument("--stalls", metavar="REPORT", help="print the stall table of an ncu report")
    ap.add_argument("--raw-dir", help="with --stalls: also write each kernel's source page here")
    ap.add_argument("--csv-dir", help="summarize source pages saved by --raw-dir instead")
    args = ap.parse_args(argv)
    if args.stalls or args.csv_dir:
        print(top_stalls(args.stalls, args.csv_dir, args.raw_dir))
    elif args.providers:
        profile_providers(args.providers, args.dist)
    else:
        profile_step(args.recipes, args.dist)


if __name__ == "__main__":
    main()
