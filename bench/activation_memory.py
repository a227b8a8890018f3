"""Activation memory of one attention layer: the bytes each recipe's op saves for the backward,
per token, from the op's own autograd registration (run under FakeTensorMode with the GPU's
dtypes, so no GPU is needed and nothing is estimated by hand).

    python -m bench.activation_memory [--hq 16 --hkv 16 --d 128]

The per-batch plan tensors (int32 segment bounds and launch orders) are shared by all layers
and are not counted per layer.
"""

from __future__ import annotations

import argparse

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from flamia import ops
from flamia.kernels import quantize


def saved_bytes_per_token(recipe: str, hq: int, hkv: int, d: int, total: int = 4096) -> dict:
    """Bytes per token the op of ``recipe`` saves for its backward, and the saved tensors."""
    saved = []

    def pack(t):
        if t.dtype != torch.int32:  # plan tensors: per batch, not per layer
            saved.append((tuple(t.shape), t.dtype, t.numel() * t.element_size()))
        return t

    # The GPU's storage for E4M3 data (the Triton interpreter's is bf16, see kernels.quantize).
    interpreter_storage, quantize.FP8_STORAGE = quantize.FP8_STORAGE, torch.float8_e4m3fn
    try:
        _run_fake(recipe, hq, hkv, d, total, pack)
    finally:
        quantize.FP8_STORAGE = interpreter_storage
    return {"bytes_per_token": sum(b for _, _, b in saved) / total,
            "tensors": [(s, str(dt).replace("torch.", "")) for s, dt, _ in saved]}


def _run_fake(recipe, hq, hkv, d, total, pack):
    with FakeTensorMode(), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        mk = lambda h: torch.empty(total, h, d, dtype=torch.bfloat16).requires_grad_()
        q, k, v = mk(hq), mk(hkv), mk(hkv)
        i32 = lambda n: torch.empty(n, dtype=torch.int32)
        args = (q, k, v, i32(total), i32(total), i32(total // 64), i32(total // 64),
                i32(total // 64), d**-0.5, recipe)
        op = ops.attention_fwd if recipe == "bf16" else ops.attention_fwd_fp8
        op(*args)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--hq", type=int, default=16)
    ap.add_argument("--hkv", type=int, default=16)
    ap.add_argument("--d", type=int, default=128)
    args = ap.parse_args(argv)
    base = saved_bytes_per_token("bf16", args.hq, args.hkv, args.d)["bytes_per_token"]
    print(f"| recipe | saved bytes per token per layer (Hq={args.hq}, Hkv={args.hkv}, D={args.d})"
          " | vs bf16 | saved tensors |\n|---|---:|---:|---|")
    for recipe in ops.TRITON_RECIPES:
        r = saved_bytes_per_token(recipe, args.hq, args.hkv, args.d)
        shape = lambda s: "[" + ", ".join("T" if n == 4096 else str(n) for n in s) + "]"
        kinds = ", ".join(f"{dt}{shape(s)}" for s, dt in r["tensors"])
        print(f"| {recipe} | {r['bytes_per_token']:.0f} | {r['bytes_per_token'] / base:.2f}x | "
              f"{kinds} |")


if __name__ == "__main__":
    main()
