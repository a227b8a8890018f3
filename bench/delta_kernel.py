"""The backward's delta kernel (delta = rowsum(dO * O), kernels.attention._attn_bwd_delta_kernel)
alone, in one process on the GPU: (token, head) rows per program and warps against a plain
torch expression of the same sum and a copy of O (the bandwidth it could reach):

    python -m bench.delta_kernel [--configs 64,4 128,8 256,8] [--tokens 32768]

Per shape (Hq, D) and variant: median ms (triton.testing.do_bench), the bytes it moves per
second (O and dO read; the copy's read and write) and the largest difference to the float64 sum.
"""

from __future__ import annotations

import argparse

import torch
import triton
from triton.testing import do_bench

from flamia.kernels import attention as K


def _delta_launch(o, do, delta, rows: int, warps: int):
    total, hq, d = o.shape
    K._attn_bwd_delta_kernel[(triton.cdiv(total * hq, rows),)](
        o, do, delta, delta, delta, delta, delta, o.stride(0), o.stride(1), do.stride(0),
        do.stride(1), delta.stride(0), 0, total, HQ=hq, HEAD_DIM=d, BLOCK_T=rows, IS_FP8=False,
        num_warps=warps)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--configs", nargs="+", default=["64,4", "128,4", "128,8", "256,8"])
    ap.add_argument("--tokens", type=int, default=32768)
    args = ap.parse_args(argv)
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, triton "
          f"{triton.__version__}, {args.tokens} tokens")
    print("| Hq | D | variant | ms | GB/s moved | max abs diff to float64 |")
    print("|---|---|---|---:|---:|---:|")
    for hq, d in ((16, 128), (16, 64), (32, 128)):
        gen = torch.Generator(device="cuda").manual_seed(0)
        o, do = (torch.randn((args.tokens, hq, d), generator=gen, device="cuda")
                 .to(torch.bfloat16) for _ in range(2))
        exact = (o.double() * do.double()).sum(-1).t()
        read = 2 * o.numel() * o.element_size()
        rows = [("torch (o.float() * do.float()).sum(-1)",
                 lambda: (o.float() * do.float()).sum(-1).t().contiguous())]
        rows += [("o.clone() (reads O once, writes it)", lambda: o.clone())]
        for config in args.configs:
            r, w = (int(x) for x in config.split(","))
            delta = torch.empty((hq, args.tokens), dtype=torch.float32, device="cuda")
            rows.append((f"delta kernel {r} rows, {w} warps",
                         lambda delta=delta, r=r, w=w: (_delta_launch(o, do, delta, r, w), delta)[1]))
        for name, fn in rows:
            out = fn()
            diff = ("" if out.shape != exact.shape
                    else f"{(out.double() - exact).abs().max().item():.1e}")
            ms = do_bench(fn, warmup=25, rep=200)
            gbs = read / ms / 1e6  # the clone reads O and writes as much
            print(f"| {hq} | {d} | {name} | {ms:.4f} | {gbs:.0f} | {diff} |")


if __name__ == "__main__":
    main()
