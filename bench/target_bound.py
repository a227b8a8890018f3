"""How far issue 7's target (mxfp8 fwd+bwd at least 1.3x the fastest BF16 baseline) lies from what
the GPU can do, per workload of a benchmark run: the fastest any mxfp8 fwd+bwd of DESIGN.md's
recipe could be on that GPU (its memory passes at the DRAM bandwidth plus its seven matmuls at the
FP8 tensor cores' peak), and the rate the attention kernels would need for 1.3x with the memory
passes as they are measured.

    python -m bench.target_bound bench/results/attention_<run>.json [--target 1.3]
        [--bandwidth-tbs B --fp8-tflops F --bf16-tflops G]   # a GPU not in PEAKS

Reads the JSON that ``bench.attention`` writes; flamia-mxfp8's kernel times come from its
``--profile`` (``profile_ms``). Per workload (D = 128 packed workloads are the ones the target
judges; the others are shown for reference, and so is a timing experiment's row, marked as
bench.summary marks it):
- bound: fewest pass bytes / bandwidth + 3.5 x causal FLOPs / FP8 peak. The fewest bytes are what
  any mxfp8 path must move outside its attention kernels (pass_bytes "fewest"): Q, K, V read once
  in bf16 and written once per E4M3 layout the Hopper FP8 MMA needs (token-major copies included,
  DESIGN.md section 4), dO and O read once and dO written in both layouts; scales, LSE and delta
  as stored today. The attention kernels' own loads are left out (they can hide behind the MMAs),
  so the bound is optimistic: no mxfp8 path on that GPU is faster.
- max ratio: fastest baseline / bound, the highest "vs best" any such path could reach.
- need TF/s: 3.5 x causal FLOPs / (fastest baseline / target - measured pass time), the rate the
  attention kernels would need for the target while the passes take what they take now, and that
  as a share of the FP8 peak; beside it the rate mxfp8's attention kernels reach now and
  flamia-bf16's kernels' rate as a share of the BF16 peak (how close to its peak this tile
  structure already gets).
Peaks are NVIDIA's data-sheet numbers (dense, at the boost clock); timed runs sit near 1.9 GHz.
"""

from __future__ import annotations

import argparse
import sys

from bench.attention import BWD_FLOPS, causal_flops, packed_lengths
from bench.summary import (EXPERIMENT_MARK, TARGETS, fastest_baseline, load, required_ratio,
                           workload_key, workload_label)

# GPU name substring -> (DRAM bytes/s, FP8 dense FLOP/s, BF16 dense FLOP/s), SXM parts.
PEAKS = {
    "H200": (4.8e12, 1979e12, 989e12),
    "H100 80GB HBM3": (3.35e12, 1979e12, 989e12),
}
# The memory-bound kernels of the mxfp8 path (bench.attention --profile names): everything else
# in flamia-mxfp8's profile is an attention kernel (or a queue fill, counted with them).
PASS_KERNELS = ("_quantize_qkv_kernel", "_attn_bwd_prep8_kernel", "_token_major_copy_kernel")
PROVIDER = "flamia-mxfp8"  # the provider whose target (bench.summary.TARGETS) this measures


def peaks_for(gpu: str, bandwidth_tbs=None, fp8_tflops=None, bf16_tflops=None):
    """(bytes/s, FP8 FLOP/s, BF16 FLOP/s) of a GPU by name, each overridable; an unknown GPU needs
    all three."""
    known = next((p for name, p in PEAKS.items() if name in gpu), None)
    given = (bandwidth_tbs and bandwidth_tbs * 1e12, fp8_tflops and fp8_tflops * 1e12,
             bf16_tflops and bf16_tflops * 1e12)
    if known is None and not all(given):
        raise SystemExit(f"GPU {gpu!r} has no peaks here (known: {', '.join(PEAKS)}); give "
                         "--bandwidth-tbs, --fp8-tflops and --bf16-tflops")
    return tuple(g or k for g, k in zip(given, known or (None,) * 3))


def pass_traffic(tokens: int, hq: int, hkv: int, d: int) -> dict[str, tuple[int, int]]:
    """{pass: (bytes read, bytes written)} of mxfp8's memory passes per fwd+bwd as built
    (flamia.ops): quantize_qkv reads bf16 Q, K, V and writes their E4M3 data, V's token-major copy
    and fp32 scales; the backward's prep kernel reads dO, O, LSE and sQ and writes E4M3 dO, its
    token-major copy, its scale, delta and the per-query rows; token_major_copies reads Q8, K8 and
    writes their token-major copies. Padding of the token-major copies (to the tile size) is left
    out."""
    eq, ekv = tokens * hq * d, tokens * hkv * d  # elements of Q (and dO, O), of K (and V)
    row = 4 * tokens  # one fp32 per token and head
    return {
        "quantize": (2 * (eq + 2 * ekv), (eq + 2 * ekv) + ekv + row * (hq + 2 * hkv)),
        "prep": (2 * 2 * eq + 2 * row * hq, 2 * eq + (1 + 1 + 4) * row * hq),
        "copies": (eq + ekv, eq + ekv),
    }


def pass_bytes(tokens: int, hq: int, hkv: int, d: int) -> dict[str, int]:
    """"built": the bytes of pass_traffic; "fewest": the same with Q's and K's token-major copies
    written by the forward's quantizer from the values it has (no read of Q8, K8 back), the least
    any mxfp8 path of DESIGN.md section 4 moves outside its attention kernels on Hopper."""
    traffic = pass_traffic(tokens, hq, hkv, d)
    built = sum(r + w for r, w in traffic.values())
    return {"built": built, "fewest": built - traffic["copies"][0]}


def workload_bounds(run: dict, target: float, peaks: tuple[float, float, float]) -> list[dict]:
    """One dict per workload that has flamia-mxfp8 (with its profile) and a baseline."""
    bandwidth, fp8_peak, bf16_peak = peaks
    rows: dict[tuple, dict[str, dict]] = {}
    for row in run["results"]:
        if "error" not in row and row.get("fwd_bwd_ms") is not None:
            rows.setdefault(workload_key(row), {})[row["provider"]] = row
    out = []
    for key, providers in rows.items():
        best = fastest_baseline({p: r["fwd_bwd_ms"] for p, r in providers.items()})
        mx = providers.get(PROVIDER)
        if best is None or mx is None or not mx.get("profile_ms"):
            continue
        name, n_rows, length, hq, hkv, d = key
        lengths = packed_lengths(name, n_rows, length)
        if len(lengths) != mx["segments"]:
            raise SystemExit(f"{workload_label(key)}: {len(lengths)} segments recomputed, the run "
                             f"says {mx['segments']}: not the workload bench.attention drew")
        flops = (1 + BWD_FLOPS) * causal_flops(lengths, hq, d)
        nbytes = pass_bytes(n_rows * length, hq, hkv, d)
        passes_ms = sum(ms for k, ms in mx["profile_ms"].items() if k.startswith(PASS_KERNELS))
        attention_ms = sum(mx["profile_ms"].values()) - passes_ms
        bound_ms = (nbytes["fewest"] / bandwidth + flops / fp8_peak) * 1e3
        left_ms = best[1] / target - passes_ms
        bf16 = providers.get("flamia-bf16")
        bf16_ms = sum(bf16["profile_ms"].values()) if bf16 and bf16.get("profile_ms") else None
        experiment = bool(mx.get("experiment"))  # timing only, wrong values: judged by nothing
        out.append({
            "workload": workload_label(key) + (EXPERIMENT_MARK if experiment else ""),
            "judged": required_ratio(PROVIDER, key) is not None and not experiment,
            "baseline": best[0], "baseline_ms": best[1], "target_ms": best[1] / target,
            "bound_ms": bound_ms, "max_ratio": best[1] / bound_ms,
            "mxfp8_ms": mx["fwd_bwd_ms"], "ratio": best[1] / mx["fwd_bwd_ms"],
            "passes_ms": passes_ms, "passes_bound_ms": nbytes["fewest"] / bandwidth * 1e3,
            "passes_tbs": nbytes["built"] / passes_ms * 1e-9 if passes_ms else None,
            "attention_tflops": flops / attention_ms * 1e-9,
            "need_tflops": flops / left_ms * 1e-9 if left_ms > 0 else None,
            "need_share": flops / left_ms * 1e3 / fp8_peak if left_ms > 0 else None,
            "bf16_tflops": flops / bf16_ms * 1e-9 if bf16_ms else None,
            "bf16_share": flops / bf16_ms * 1e3 / bf16_peak if bf16_ms else None,
        })
    return out


def format_bounds(bounds: list[dict], target: float, gpu: str, peaks) -> str:
    bandwidth, fp8_peak, bf16_peak = peaks
    pct = lambda x: "-" if x is None else f"{100 * x:.0f}%"
    lines = [
        f"GPU {gpu}: peaks {bandwidth * 1e-12:.2f} TB/s, FP8 {fp8_peak * 1e-12:.0f} TFLOP/s, BF16 "
        f"{bf16_peak * 1e-12:.0f} TFLOP/s (data sheet, dense); target {target}x; * = a workload "
        "the target judges",
        "",
        "| workload | best baseline ms | target ms | bound ms (max ratio) | mxfp8 ms (ratio) | "
        "passes ms (bound, TB/s) | attention TF/s now | need TF/s (FP8 peak) | bf16 kernels "
        "TF/s (BF16 peak) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for b in bounds:
        need = ("unreachable: the passes alone exceed the target" if b["need_tflops"] is None
                else f"{b['need_tflops']:.0f} ({pct(b['need_share'])})")
        bf16 = ("-" if b["bf16_tflops"] is None
                else f"{b['bf16_tflops']:.0f} ({pct(b['bf16_share'])})")
        tbs = "-" if b["passes_tbs"] is None else f"{b['passes_tbs']:.2f}"
        lines.append(
            f"| {b['workload']}{' *' if b['judged'] else ''} | {b['baseline_ms']:.3f} "
            f"({b['baseline']}) | {b['target_ms']:.3f} | {b['bound_ms']:.3f} "
            f"({b['max_ratio']:.2f}x) | {b['mxfp8_ms']:.3f} ({b['ratio']:.2f}x) | "
            f"{b['passes_ms']:.3f} ({b['passes_bound_ms']:.3f}, {tbs}) | "
            f"{b['attention_tflops']:.0f} | {need} | {bf16} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", help="a bench.attention JSON with --profile")
    ap.add_argument("--target", type=float, default=TARGETS[PROVIDER][0],
                    help="ratio to the fastest baseline (default: the target's, bench.summary)")
    ap.add_argument("--bandwidth-tbs", type=float)
    ap.add_argument("--fp8-tflops", type=float)
    ap.add_argument("--bf16-tflops", type=float)
    args = ap.parse_args(argv)
    run = load(args.run)
    gpu = run.get("env", {}).get("gpu", "unknown")
    peaks = peaks_for(gpu, args.bandwidth_tbs, args.fp8_tflops, args.bf16_tflops)
    bounds = workload_bounds(run, args.target, peaks)
    if not bounds:
        raise SystemExit(f"{args.run}: no workload with flamia-mxfp8's profile and a baseline "
                         "(run bench.attention with --profile and a baseline provider)")
    print(format_bounds(bounds, args.target, gpu, peaks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
