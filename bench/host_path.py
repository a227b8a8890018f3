"""Host time of flamia's own Python/torch path per fwd+bwd, without the Triton launches (they are
replaced by no-ops), on CPU tensors: validation, batch plan cache, custom-op dispatch, autograd,
allocations. Runs on any machine; bench/cpu_overhead.py measures the whole host path on the GPU.

    python -m bench.host_path [--tokens 32768] [--heads 16] [--recipes bf16 mxfp8]

2026-12-03, a 2-core CPU machine: BF16 8.94 -> 0.28 ms per call at 32k tokens once the op
stopped materializing a zero gradient for lse (a 2 MB fill per backward on CPU; on the GPU one
fill kernel); mxfp8 0.50 ms.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("TRITON_INTERPRET", "1")  # CPU tensors through the triton launchers

import torch  # noqa: E402

import flamia  # noqa: E402
from flamia.kernels import attention as K, quantize as Q  # noqa: E402

KERNELS = {K: ("_attn_fwd_kernel", "_attn_bwd_dkdv_kernel", "_attn_bwd_dq_kernel",
               "_attn_bwd_delta_kernel"),
           Q: ("_quantize_per_token_kernel", "_quantize_qkv_kernel", "_token_major_copy_kernel")}


class _NoLaunch:
    def __getitem__(self, grid):
        return lambda *args, **kwargs: None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--tokens", type=int, default=32768)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--recipes", nargs="+", default=["bf16", "mxfp8"])
    args = ap.parse_args(argv)
    for module, names in KERNELS.items():
        for name in names:
            setattr(module, name, _NoLaunch())
    t, h, d = args.tokens, args.heads, 128
    mk = lambda: torch.randn(t, h, d, dtype=torch.bfloat16, requires_grad=True)
    q, k, v = mk(), mk(), mk()
    do = torch.randn(t, h, d, dtype=torch.bfloat16)
    cuts = sorted({0, t, t // 32, t // 5, t // 4, (3 * t) // 5})
    cu = torch.tensor(cuts, dtype=torch.int32)
    for recipe in args.recipes:
        def step():
            o = flamia.attention(q, k, v, cu, t, recipe=recipe, impl="triton")
            torch.autograd.grad(o, (q, k, v), do)

        for _ in range(3):
            step()
        n = 20
        t0 = time.perf_counter()
        for _ in range(n):
            step()
        ms = (time.perf_counter() - t0) * 1e3 / n
        print(f"{recipe}: {ms:.3f} ms of host time per fwd+bwd without kernel launches "
              f"({t} tokens, {h} heads, D={d})")


if __name__ == "__main__":
    main()
