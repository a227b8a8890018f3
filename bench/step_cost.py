"""Where an attention kernel's time goes, per step and per call (CPU arithmetic on a run's JSON):
for each profiled kernel of a provider, a least-squares fit over the run's workloads of

    kernel ms = a * unmasked steps / SMs + b * masked steps / SMs + c

with the (query tile, key tile) steps counted from the batch plan as the kernels walk it (grid
tiles, bench.tile_model's counts, times the heads). a and b are microseconds per step on one SM,
c is milliseconds per call that no step accounts for: programs starting and ending (loads before
the first step, stores after the last, with nothing beside them when one program fills an SM),
the tail of the launch. A large c against the steps' share says a persistent form of the kernel
(programs taking tiles from a queue) has something to win; a small one says it has not.

    python -m bench.step_cost bench/results/attention_<run>.json [--providers flamia-mxfp8]
        [--tiles fwd=64,64 dq=64,64 dkdv=64,64] [--sms 132]

Workloads of the run with D = 128 and Hq = Hkv = 16 (the heads scale the counts; other head dims
change the step's cost) and a kernel profile (--profile). Tiles (queries x keys) default to the
FP8 kernels' on Hopper (kernels.attention's FP8 blocks, the Gluon FP8 dK/dV kernel's
DKDV8_CONFIG); give the BF16 kernels' for flamia-bf16 (Gluon: forward 128 x 128, or 128 x 64
where max_seqlen <= 1024, so its forward fit is approximate; dQ 128 x 64; dK/dV 64 x 128).
"""

from __future__ import annotations

import argparse
import json
import os

import torch

from bench.attention import packed_lengths
from bench.tile_model import plan_steps
from flamia.kernels import attention as K
from flamia.kernels import attention_hopper as H

# The FP8 kernels' tiles on Hopper at D = 128: the triton forward and dQ, the Gluon dK/dV kernel
FP8_TILES = {"fwd": K.BLOCKS[("fwd", True)][128], "dq": K.BLOCKS[("dq", True)][128],
             "dkdv": H.DKDV8_CONFIG[:2]}


def kernel_kind(name: str) -> str | None:
    """fwd, dq or dkdv for a profiled kernel's name, None for the others (quantizers, copies)."""
    for kind in ("dkdv", "dq", "fwd"):
        if f"_{kind}" in name:
            return kind
    return None


def steps(lengths, tiles) -> dict[str, tuple[int, int]]:
    """(unmasked, masked) steps per head of each kernel kind on grid tiles of these shapes."""
    return plan_steps(lengths, tiles["fwd"], tiles["dkdv"], tiles["dq"])[0]


def fit(rows, sms):
    """rows: (unmasked steps, masked steps, kernel ms) per workload, steps summed over heads.
    Returns (a us, b us, c ms, residual ms per row)."""
    a = torch.tensor([[u / sms, m / sms, 1.0] for u, m, _ in rows], dtype=torch.float64)
    y = torch.tensor([ms for _, _, ms in rows], dtype=torch.float64)
    sol = torch.linalg.lstsq(a, y.unsqueeze(1)).solution.squeeze(1)
    return sol[0].item() * 1e3, sol[1].item() * 1e3, sol[2].item(), (y - a @ sol).tolist()


def report(run: dict, providers, tiles, sms) -> list[str]:
    lines = []
    counts = {}
    for provider in providers:
        results = [r for r in run["results"] if r["provider"] == provider and r["D"] == 128
                   and r["Hq"] == r["Hkv"] == 16 and r.get("profile_ms")]
        if len(results) < 4:
            lines.append(f"{provider}: {len(results)} profiled D = 128, 16-head workloads; the "
                         "fit needs 4 or more")
            continue
        per_kernel = {}
        for r in results:
            key = (r["workload"], r["rows"], r["L"])
            if key not in counts:
                counts[key] = steps(packed_lengths(r["workload"], r["rows"], r["L"]), tiles)
            for name, ms in r["profile_ms"].items():
                kind = kernel_kind(name)
                if kind:
                    u, m = counts[key][kind]
                    per_kernel.setdefault(name, []).append((r["workload"], u * 16, m * 16, ms))
        lines.append(f"## {provider}")
        lines.append("| kernel | us per unmasked step | us per masked step | ms per call | "
                     "share of the kernel's time per workload (c / ms) | worst residual ms |")
        lines.append("|---|---:|---:|---:|---|---:|")
        for name, rows in per_kernel.items():
            a, b, c, res = fit([row[1:] for row in rows], sms)
            share = ", ".join(f"{w} {c / ms:.0%}" for w, _, _, ms in rows)
            worst = max(res, key=abs)
            lines.append(f"| {name} | {a:.3f} | {b:.3f} | {c:.3f} | {share} | {worst:+.3f} |")
    return lines


def main(argv=None):
    pair = lambda text: (text.split("=")[0], tuple(int(x) for x in text.split("=")[1].split(",")))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", help="a bench.attention results JSON with a kernel profile")
    ap.add_argument("--providers", nargs="+", default=["flamia-mxfp8"])
    ap.add_argument("--tiles", nargs="+", type=pair, default=[],
                    help="kernel=M,N (queries x keys), e.g. dkdv=64,128")
    ap.add_argument("--sms", type=int, default=132, help="SMs of the run's GPU (H100/H200: 132)")
    args = ap.parse_args(argv)
    tiles = {**FP8_TILES, **dict(args.tiles)}
    unknown = set(tiles) - set(FP8_TILES)
    if unknown:
        ap.error(f"--tiles: unknown kernels {sorted(unknown)}; accepted: fwd, dq, dkdv")
    with open(args.run) as f:
        run = json.load(f)
    print(f"# {os.path.basename(args.run)}: kernel ms = a * unmasked steps / {args.sms} + "
          f"b * masked steps / {args.sms} + c, least squares over the workloads; tiles "
          + ", ".join(f"{k} {m}x{n}" for k, (m, n) in tiles.items()))
    print("\n".join(report(run, args.providers, tiles, args.sms)))


if __name__ == "__main__":
    main()
