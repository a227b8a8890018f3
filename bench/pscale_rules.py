"""What other scale rules for the forward's in-register P' would cost in accuracy (CPU, the
reference's numerics; no kernel implements them).

The FP8 recipes quantize P' = P sV per row of each 64-key tile with the E8M0 scale of the row's
maximum over its visible entries (``amax``, DESIGN.md s4). In the FP8 forward kernel that row
maximum, and the multiply by its reciprocal, are part of each step's dependent chain (SASS,
triton 3.6, unmasked step: 32 FMNMX, 32 FMUL and the shuffles of a row reduction per thread of
599 instructions; bench.sass_report). Two rules that need neither, both safe (visible entries
only) and both keeping every E4M3 value at most 256:

  tile_bound     the scale from a bound of P' instead of its maximum: P = exp2(x - ceil(t)) with
                 t the row's largest visible logit in the tile (the online softmax computes it
                 anyway), so P <= 1, and P' <= the largest visible sV of the tile; that bound's
                 E8M0 exponent goes into exp2's offset. Tile-local, so independent of the order
                 in which key tiles arrive, like ``amax``.
  running_bound  no per-tile scale at all: P relative to the running row maximum, and the
                 bound from the running maximum of visible sV, as FlashAttention-3's FP8 forward
                 casts P in [0, 1] directly. The scale then changes only with the running
                 maximum, so the O += X * scale multiply folds into the rescale by alpha; but the
                 values depend on the key tiles' order (ascending here, as the kernels run).

    python -m bench.pscale_rules [--seeds 0-3] [--total 1024]

Prints, per input kind and rule, the relative L2 error of O against float64 exact attention (mean
and max over seeds) and the worst token's. On every seed and input kind ``amax`` is checked to be
flamia.reference's own forward bit for bit; where it is not, the run stops with exit status 1.
"""

from __future__ import annotations

import argparse
import sys

import torch

from flamia.formats import E4M3, e8m0_exponent, e8m0_scale, round_to_format
from flamia.recipes import get_recipe
from flamia.reference import (
    _forward_chunk,
    _logits2,
    _prepare,
    document_causal_mask,
    exact_attention,
    reference_attention,
)
from flamia.report import _seed_range, make_inputs

RULES = ("amax", "tile_bound", "running_bound")
KINDS = ("normal", "outliers", "small_tokens", "sink")
SINK_LOGIT_SCALE = 40.0  # norm of each document's first key along the queries' shared direction


def forward_o(q, k, v, cu_seqlens, recipe: str, rule: str) -> torch.Tensor:
    """O [T, Hq, D] (float32) of ``recipe``'s forward with P' scaled by ``rule``."""
    rec = get_recipe(recipe)
    total = q.shape[0]
    scale = q.shape[-1] ** -0.5
    mask = document_causal_mask(cu_seqlens, total)
    qd, sq, kd, sk, vd, sv = _prepare(q, k, v, rec)
    if rule == "amax":
        o, _ = _forward_chunk(qd, sq, kd, sk, vd, sv, mask, scale, rec)
        return o.movedim(0, 1)
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}; accepted: {RULES}")
    x = _logits2(qd, sq, kd, sk, mask, scale)
    m = torch.ceil(x.amax(dim=-1))
    l = torch.exp2(x - m[..., None]).sum(dim=-1)
    group = rec.inreg_group
    pq = torch.zeros_like(x)
    run_max = torch.full(x.shape[:2], float("-inf"))
    run_bound = torch.zeros(x.shape[:2])
    for g0 in range(0, total, group):
        xs = x[..., g0:g0 + group]
        svs = sv[:, None, g0:g0 + group].expand_as(xs)
        tile_max = torch.ceil(xs.amax(dim=-1))
        tile_bound = torch.where(torch.isfinite(xs), svs, torch.zeros_like(svs)).amax(dim=-1)
        if rule == "tile_bound":
            c, bound = tile_max, tile_bound
        else:
            run_max = torch.maximum(run_max, tile_max)
            run_bound = torch.maximum(run_bound, tile_bound)
            c, bound = run_max, run_bound
        c = torch.where(torch.isfinite(c), c, torch.zeros_like(c))  # rows with nothing visible
        s = e8m0_scale(e8m0_exponent(bound, E4M3))[..., None]
        data = round_to_format(torch.exp2(xs - c[..., None]) * svs / s, E4M3)
        pq[..., g0:g0 + group] = data * s * torch.exp2(c - m)[..., None]
    return (torch.matmul(pq, vd) / l[..., None]).movedim(0, 1)


def inputs(kind: str, total: int, seed: int, cu_seqlens: torch.Tensor):
    """q, k, v (bf16) of an input kind of flamia.report, or ``sink``: normal inputs whose queries
    share a direction along which each document's first key has norm SINK_LOGIT_SCALE (an
    attention sink, so that later keys' P are small next to the running maximum)."""
    if kind != "sink":
        return make_inputs(kind, total, 2, 2, 128, seed)[:3]
    q, k, v, _ = make_inputs("normal", total, 2, 2, 128, seed)
    u = torch.ones(128) / 128**0.5
    k = k.float()
    k[cu_seqlens[:-1].long()] = SINK_LOGIT_SCALE * u
    return (q.float() + 2 * u).bfloat16(), k.bfloat16(), v


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--seeds", type=_seed_range, default="0-3")
    ap.add_argument("--total", type=int, default=1024)
    ap.add_argument("--recipe", default="mxfp8")
    args = ap.parse_args(argv)
    total = args.total
    # documents off the 64-token tile grid, so that tiles hold rows of two documents
    bounds = sorted({0, total // 5, (7 * total) // 8, total})
    cu = torch.tensor(bounds, dtype=torch.int32)
    print(f"recipe {args.recipe}, T={total}, documents {bounds}, Hq=Hkv=2, D=128, "
          f"seeds {args.seeds[0]}-{args.seeds[-1]}; "
          "O relative L2 error against float64 exact attention")
    print("| input | rule | mean | max | worst token (max) | max change vs amax |")
    print("|---|---|---:|---:|---:|---:|")
    for kind in KINDS:
        errs = {r: [] for r in RULES}
        for seed in args.seeds:
            q, k, v = inputs(kind, total, seed, cu)
            exact = exact_attention(q, k, v, cu).double()
            for rule in RULES:
                o = forward_o(q, k, v, cu, args.recipe, rule)
                if rule == "amax":  # the harness computes the recipe itself: check it
                    ref = reference_attention(q, k, v, cu, recipe=args.recipe)
                    if not torch.equal(o.to(ref.dtype), ref):
                        print("harness check FAILED: amax is not flamia.reference's forward")
                        return 1
                d = o.double() - exact
                tok = (d.norm(dim=-1) / exact.norm(dim=-1)).max().item()
                errs[rule].append(((d.norm() / exact.norm()).item(), tok))
        base = [e for e, _ in errs["amax"]]
        for rule in RULES:
            l2 = [e for e, _ in errs[rule]]
            change = max(abs(a / b - 1) for a, b in zip(l2, base))
            print(f"| {kind} | {rule} | {sum(l2) / len(l2):.4%} | {max(l2):.4%} | "
                  f"{max(t for _, t in errs[rule]):.3%} | {change:.2e} |")
    print("harness check: the amax rule is flamia.reference's forward, bit for bit (bf16 O)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
