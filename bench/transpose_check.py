"""GPU check of the Triton token-major copy (flamia.kernels.quantize.token_major_copy) against
torch's permute copy: bytes equal, and the time of each. PYTHONPATH=$PWD python -m bench.transpose_check"""

import os

import torch
from triton.testing import do_bench

from flamia.kernels.quantize import quantize_mx_token, token_major_copy


def main():
    x = torch.randn(32768, 16, 128, device="cuda").bfloat16()
    x8, _, _ = quantize_mx_token(x, transposed=False)
    for total in (32768, 1000):
        d = x8[:total]
        os.environ["FLAMIA_FP8_TRANSPOSE"] = "torch"
        ref = token_major_copy(d)
        t_torch = do_bench(lambda: token_major_copy(d), return_mode="median")
        os.environ["FLAMIA_FP8_TRANSPOSE"] = "triton"
        ours = token_major_copy(d)
        t_triton = do_bench(lambda: token_major_copy(d), return_mode="median")
        same = torch.equal(ours.view(torch.uint8), ref.view(torch.uint8))
        print(f"T={total}: bytes equal {same}; torch {t_torch:.3f} ms, triton {t_triton:.3f} ms",
              flush=True)


if __name__ == "__main__":
    main()
