"""Quick GPU check of the MXFP8 path against the reference recipe (prints relative differences
per tensor and the quantizer's agreement). PYTHONPATH=$PWD python -m bench.fp8_check"""

import time

import torch

import flamia
from flamia.kernels.quantize import quantize_mx_token
from flamia.reference import attention_forward_backward, quantize_operand


def main():
    g = torch.Generator(device="cuda").manual_seed(0)
    x = (torch.randn(300, 4, 128, device="cuda", generator=g) * 3).bfloat16()
    x8, xt8, s = quantize_mx_token(x)
    data, scale = quantize_operand(x, "mx_token")
    print("quantizer: scale mismatches", (s.t() != scale).sum().item(), "data mismatches",
          (x8.float() != data).sum().item(), "transposed mismatches",
          (xt8.permute(2, 0, 1).float() != data).sum().item(), flush=True)
    for lengths, hq, hkv, d in [([1, 7, 129, 63, 100], 4, 2, 64), ([1, 7, 129, 1000, 63], 4, 2, 128)]:
        cu = torch.zeros(len(lengths) + 1, dtype=torch.int32)
        cu[1:] = torch.cumsum(torch.tensor(lengths), 0)
        cu = cu.cuda()
        total = sum(lengths)
        mk = lambda h: torch.randn(total, h, d, device="cuda", generator=g).bfloat16()
        q, k, v, do = mk(hq), mk(hkv), mk(hkv), mk(hq)
        t = time.time()
        for recipe in ("bf16", "mxfp8", "nvfp4_fp8"):
            ours = attention_forward_backward(
                lambda *a: flamia.attention(*a, total, recipe=recipe, impl="triton"), q, k, v, do, cu)
            ref = attention_forward_backward(flamia.reference_attention, q, k, v, do, cu,
                                             recipe=recipe)
            rel = [((a.float() - b.float()).norm() / b.float().norm()).item() for a, b in zip(ours, ref)]
            nan = [int(torch.isnan(a).sum()) for a in ours]
            print(f"{recipe:9} D={d} kernel vs reference recipe rel O/dQ/dK/dV:",
                  " ".join(f"{r:.2e}" for r in rel), "nans", nan, f"{time.time() - t:.0f}s",
                  flush=True)


if __name__ == "__main__":
    main()
