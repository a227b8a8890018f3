"""Work model of the tiling (CPU, no GPU): how many (query tile, key tile) steps each BF16 kernel
program runs on grid tiles and on doc tiles (FLAMIA_TILES, flamia.kernels.attention.doc_tiles),
and how many of them are masked, for the benchmark's packed workloads (bench/attention.py,
DESIGN.md section 7). The launch orders are the batch plan's own (flamia.ops.batch_plan, built in
each mode); the tile ranges are computed from them as the kernels compute them
(kernels.attention._key_tile_ranges and the dK/dV kernel's query-tile ranges). Steps count
whole tiles, per head: a step's cost depends on the tile shape and on whether it is masked, so
the model compares step counts of one kernel across modes, not across kernels.

    python -m bench.tile_model [--dists u32_1024 lognormal_1k ...] [--fwd 128,128] [--dkdv 64,128]
        [--dq 128,64]

Defaults: the Gluon kernels' tiles (the H200's defaults): forward 128 x 128, dQ 128 x 64,
dK/dV 64 queries x 128 keys.
"""

from __future__ import annotations

import argparse
import heapq
import os
from unittest import mock

import torch

from bench.attention import DISTRIBUTIONS, packed_lengths
from flamia import ops
from flamia.kernels import attention as K


def _cu(lengths):
    cu = torch.zeros(len(lengths) + 1, dtype=torch.int64)
    cu[1:] = torch.cumsum(torch.tensor(lengths), 0)
    return cu


def query_steps(order, seg_start, seg_end, total, block_m, block_n, doc):
    """(unmasked, masked) steps of the forward / dQ programs of one head."""
    unmasked = masked = 0
    for entry in order.tolist():
        if entry < 0:
            continue
        start = entry if doc else entry * block_m
        row_end = int(seg_end[start]) if doc else total
        last = min(start + block_m, row_end) - 1
        if doc:
            key0 = int(seg_start[start])
            lo, hi = 0, -(-(last + 1 - key0) // block_n)
            full_lo, full_hi = 0, min((start - key0 + 1) // block_n, hi)
        else:
            lo, hi = int(seg_start[start]) // block_n, -(-(last + 1) // block_n)
            full_lo = min(-(-int(seg_start[last]) // block_n), hi)
            full_hi = max(min((start + 1) // block_n, hi), full_lo)
        unmasked += full_hi - full_lo
        masked += (hi - lo) - (full_hi - full_lo)
    return unmasked, masked


def key_steps(order, seg_start, seg_end, total, block_m, block_n, doc):
    """(unmasked, masked) steps of the dK/dV programs of one kv head and one query head."""
    unmasked = masked = 0
    for entry in order.tolist():
        if entry < 0:
            continue
        start = entry if doc else entry * block_n
        key_end = int(seg_end[start]) if doc else total
        query0 = int(seg_start[start]) if doc else 0
        last = min(start + block_n, key_end) - 1
        lo, hi = (start - query0) // block_m, -(-(int(seg_end[last]) - query0) // block_m)
        full_lo = min(-(-(last - query0) // block_m), hi)
        full_hi = max(min((int(seg_end[start]) - query0) // block_m, hi), full_lo)
        unmasked += full_hi - full_lo
        masked += (hi - lo) - (full_hi - full_lo)
    return unmasked, masked


def warpgroup_steps(seg_start, total, block_m, block_n, wg_rows=64):
    """Steps of the query tiles' consumer warpgroups (wg_rows rows each, block_m a multiple of
    it; forward, dQ; grid tiles) as the kernels run them, every warpgroup over its tile's key
    tiles, against each warpgroup over the key tiles of its own rows only (from the one holding
    its first row's segment start to its own diagonal): (tile-wide, own-rows) warpgroup steps
    per head. The latter are the key-tile ranges of wg_rows-row query tiles."""
    seg_start = torch.as_tensor(seg_start)
    lo, hi = ops._query_tile_range(seg_start, total, block_m, block_n)
    starts = torch.arange(0, total, block_m)
    warpgroups = (torch.clamp(starts + block_m, max=total) - starts + wg_rows - 1) // wg_rows
    own_lo, own_hi = ops._query_tile_range(seg_start, total, wg_rows, block_n)
    return int(((hi - lo) * warpgroups).sum()), int((own_hi - own_lo).sum())


def persistent_loads(works, programs):
    """The persistent kernels' work items (steps each, in launch order) dealt to ``programs``
    programs: statically in snake order (round r of P items forwards when r is even, backwards
    when odd: the kernels' dealing until 2026-12-05) and dynamically (each item to the first
    program free: the kernels' work queue since, attention_hopper._take_item, with an item's time
    taken as its step count). Returns (longest snake program, longest dynamic program, mean)."""
    snake = [0] * programs
    for j, work in enumerate(works):
        r, i = divmod(j, programs)
        snake[i if r % 2 == 0 else programs - 1 - i] += work
    free = [(0, p) for p in range(programs)]
    for work in works:
        load, p = heapq.heappop(free)
        heapq.heappush(free, (load + work, p))
    return max(snake), max(load for load, _ in free), sum(works) / programs


def forward_items(order, seg_start, total, block_m, block_n, heads):
    """Steps of each forward work item (query tile, head) in the persistent kernels' order
    (item w: tile order[w // heads]), grid tiles."""
    lo, hi = ops._query_tile_range(seg_start, total, block_m, block_n)
    return (hi - lo)[order.long()].repeat_interleave(heads).tolist()


def plan_steps(lengths, fwd, dkdv, dq, mode="grid"):
    """(unmasked, masked) steps per head of each kernel (fwd, dq, dkdv) on tiles of these
    shapes (queries x keys) in tile mode ``mode``, from the batch plan built for them, and the
    plan's programs (forward, dK/dV); also returns the plan."""
    total = sum(lengths)
    with mock.patch.dict(os.environ, {"FLAMIA_TILES": mode}), \
            mock.patch.object(K, "fwd_blocks", lambda d, fp8=False, short_docs=False: fwd), \
            mock.patch.object(K, "bwd_blocks", lambda d, fp8=False: dkdv), \
            mock.patch.object(K, "dq_blocks", lambda d, fp8=False: dq):
        plan = ops.batch_plan(_cu(lengths), total, 128)
    doc = mode == "doc"
    ss, se = plan.seg_start, plan.seg_end
    return {
        "fwd": query_steps(plan.order_fwd, ss, se, total, *fwd, doc),
        "dq": query_steps(plan.order_dq, ss, se, total, *dq, doc),
        "dkdv": key_steps(plan.order_dkdv, ss, se, total, *dkdv, doc),
        "programs": (int((plan.order_fwd >= 0).sum()), int((plan.order_dkdv >= 0).sum())),
    }, plan


def model(lengths, fwd, dkdv, dq):
    total = sum(lengths)
    cu = _cu(lengths)
    rows = {}
    for mode in K.TILE_MODES:
        rows[mode], plan = plan_steps(lengths, fwd, dkdv, dq, mode)
    seg_start = plan.seg_start
    rows["warpgroups"] = {"fwd": warpgroup_steps(seg_start, total, *fwd),
                          "dq": warpgroup_steps(seg_start, total, *dq)}
    rows["persistent"] = {}
    for order in K.ORDER_MODES:  # the persistent forward's dealing, 132 programs (an H100 / H200)
        with mock.patch.dict(os.environ, {"FLAMIA_ORDER": order}), \
                mock.patch.object(K, "fwd_blocks", lambda d, fp8=False, short_docs=False: fwd):
            plan = ops.batch_plan(cu, total, 128)
        rows["persistent"][order] = persistent_loads(
            forward_items(plan.order_fwd, plan.seg_start, total, *fwd, 16), 132)
    return rows


def main(argv=None):
    pair = lambda text: tuple(int(x) for x in text.split(","))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dists", nargs="+", default=list(DISTRIBUTIONS), choices=DISTRIBUTIONS)
    ap.add_argument("--rows", type=int, default=4)
    ap.add_argument("--L", type=int, default=8192)
    ap.add_argument("--fwd", type=pair, default=(128, 128))
    ap.add_argument("--dkdv", type=pair, default=(64, 128))
    ap.add_argument("--dq", type=pair, default=(128, 64))
    args = ap.parse_args(argv)
    print(f"# steps per head, B={args.rows} x L={args.L}; tiles: fwd {args.fwd}, "
          f"dQ {args.dq}, dK/dV {args.dkdv} (queries x keys)")
    print("| workload | docs | kernel | grid: unmasked + masked | doc: unmasked + masked | "
          "doc/grid steps | doc/grid masked |")
    print("|---|---:|---|---:|---:|---:|---:|")
    models = {}
    for dist in args.dists:
        lengths = packed_lengths(dist, args.rows, args.L)
        rows = models[dist] = model(lengths, args.fwd, args.dkdv, args.dq)
        for kernel in ("fwd", "dq", "dkdv"):
            (gu, gm), (du, dm) = rows["grid"][kernel], rows["doc"][kernel]
            print(f"| {dist} | {len(lengths)} | {kernel} | {gu} + {gm} | {du} + {dm} | "
                  f"{(du + dm) / (gu + gm):.2f} | {dm / max(gm, 1):.2f} |")
    print("\n# warpgroup steps per head (64-row consumer warpgroups, grid tiles): each over its "
          "tile's key tiles (as built) vs over its own rows' key tiles")
    print("| workload | kernel | tile-wide | own rows | fewer |")
    print("|---|---|---:|---:|---:|")
    for dist, rows in models.items():
        for kernel, (tile_wide, own) in rows["warpgroups"].items():
            print(f"| {dist} | {kernel} | {tile_wide} | {own} | {1 - own / tile_wide:.1%} |")
    print("\n# persistent forward, 16 heads, 132 programs: forward steps of the longest program "
          "over the mean, work items dealt in snake order (until 2026-12-05) or taken from a "
          "queue (since)")
    print("| workload | launch order | snake | queue |")
    print("|---|---|---:|---:|")
    for dist, rows in models.items():
        for order, (snake, queue, mean) in rows["persistent"].items():
            print(f"| {dist} | {order} | {snake / mean - 1:+.1%} | {queue / mean - 1:+.1%} |")


if __name__ == "__main__":
    main()
