"""GPU check of the token-major copy of the E4M3 data (flamia.kernels.quantize), per
FLAMIA_FP8_TRANSPOSE mode: torch's permute copy (the reference bytes), the Triton copy kernel and
the quantizer's own transposed store (fused). Bytes equal to the torch copy, and the time of
quantize + copy.

    PYTHONPATH=$PWD python -m bench.transpose_check
"""

import os

import torch
from triton.testing import do_bench

from flamia.kernels.quantize import TRANSPOSE_MODES, quantize_mx_token


def main():
    x = torch.randn(32768, 16, 128, device="cuda").bfloat16()
    for total in (32768, 1000):
        xs = x[:total]
        ref = None
        for mode in sorted(TRANSPOSE_MODES, key=lambda m: m != "torch"):  # torch's bytes first
            os.environ["FLAMIA_FP8_TRANSPOSE"] = mode
            x8, xt8, s = quantize_mx_token(xs)
            if ref is None:
                ref = xt8.view(torch.uint8).clone()
            same = torch.equal(xt8.view(torch.uint8), ref)
            ms = do_bench(lambda: quantize_mx_token(xs), return_mode="median")
            print(f"T={total:6} {mode:6}: bytes equal to torch's copy {same}; quantize + copy "
                  f"{ms:.3f} ms", flush=True)
    os.environ.pop("FLAMIA_FP8_TRANSPOSE")


if __name__ == "__main__":
    main()
