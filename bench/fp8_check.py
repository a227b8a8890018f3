"""GPU check of the FP8 paths against the reference recipe, under both FP8 accumulation modes.

    FLAMIA_AUTOTUNE=0 PYTHONPATH=$PWD python -m bench.fp8_check [--no-timing]

Prints (1) the quantizers' mismatches against flamia.reference (must be 0), (2) for each recipe,
head dim and MMA mode (FLAMIA_FP8_MMA fast / precise / mx, see flamia.kernels.attention
.fp8_mma_mode) the relative L2 difference of O, dQ, dK, dV between the kernel and the reference
recipe, and (3) fwd+bwd ms of one 16k-token document (Hq=Hkv=16, D=128) per recipe and mode.
"""

import os
import time

import torch
import triton
import triton.language as tl

import flamia
from flamia.kernels.quantize import quantize_mx_token, quantize_nvfp4_token
from flamia.reference import attention_forward_backward, quantize_operand


def quantizer_report(g):
    x = torch.randn(70, 2, 128, device="cuda", generator=g) * torch.exp2(
        torch.randint(-20, 20, (70, 2, 1), device="cuda", generator=g).float())
    x[3] = 0.0
    x[4, 1, :16] = 0.0
    x[5, 0, 0] = 1e4
    x = torch.cat([x, torch.randn(230, 2, 128, device="cuda", generator=g) * 3]).bfloat16()
    for name, fn, scaling in (("mxfp8", quantize_mx_token, "mx_token"),
                              ("nvfp4", quantize_nvfp4_token, "nvfp4_token")):
        data8, data_t, s = fn(x)
        data, scale = quantize_operand(x, scaling)
        bad = (data8.float() != data)
        print(f"quantizer {name}: scale mismatches {(s.t() != scale).sum().item()}, data "
              f"mismatches {bad.sum().item()}, transposed mismatches "
              f"{(data_t[..., : x.shape[0]].permute(2, 0, 1).float() != data).sum().item()} of {data.numel()}",
              flush=True)
        for idx in bad.nonzero()[:4].tolist():
            t, h, d = idx
            print(f"   [{t},{h},{d}] x={x[t, h, d].item()!r} kernel={data8[t, h, d].item()!r} "
                  f"ref={data[t, h, d].item()!r} token scale={scale[t, h].item()!r}")


@triton.jit
def _mma_kernel(a_ptr, b_ptr, c_ptr, K: tl.constexpr, PRECISE: tl.constexpr):
    m = tl.arange(0, 64)
    k = tl.arange(0, K)
    a = tl.load(a_ptr + m[:, None] * K + k[None, :])
    b = tl.load(b_ptr + k[:, None] + m[None, :] * K)  # [K, 64], K contiguous (K-major)
    if PRECISE:
        c = tl.dot(a, b, max_num_imprecise_acc=32)
    else:
        c = tl.dot(a, b)
    tl.store(c_ptr + m[:, None] * 64 + m[None, :], c)


def mma_accumulation_report(g):
    """Relative error of one E4M3 x E4M3 tl.dot (64 x K x 64, fp32 result) against the exact
    float64 product: Hopper's FP8 tensor cores do not accumulate in full fp32 (the products are
    exact, the sum is not); max_num_imprecise_acc=32 promotes to fp32 between wgmma K steps."""
    for K in (32, 64, 128):
        a = (torch.randn(64, K, device="cuda", generator=g) * 16).to(torch.float8_e4m3fn)
        b = (torch.randn(64, K, device="cuda", generator=g) * 16).to(torch.float8_e4m3fn)
        exact = a.double() @ b.double().t()
        for precise in (False, True):
            c = torch.empty(64, 64, device="cuda")
            _mma_kernel[(1,)](a, b, c, K=K, PRECISE=precise)
            err = (c.double() - exact).abs()
            print(f"E4M3 MMA 64x{K}x64 {'precise' if precise else 'fast   '}: rel L2 error "
                  f"{(err.norm() / exact.norm()).item():.2e}, max |err| / max |C| "
                  f"{(err.max() / exact.abs().max()).item():.2e}", flush=True)


def _cu(lengths):
    cu = torch.zeros(len(lengths) + 1, dtype=torch.int32)
    cu[1:] = torch.cumsum(torch.tensor(lengths), 0)
    return cu.cuda()


def set_mma(mode):
    os.environ["FLAMIA_FP8_MMA"] = mode


def main(argv=None):
    import argparse

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--no-timing", action="store_true", help="skip part (3), the 16k timing")
    args = ap.parse_args(argv)
    g = torch.Generator(device="cuda").manual_seed(0)
    mma_accumulation_report(g)
    quantizer_report(g)
    for lengths, hq, hkv, d in [([1, 7, 129, 63, 100], 4, 2, 64),
                                ([1, 7, 129, 1000, 63, 2100], 4, 2, 128)]:
        cu, total = _cu(lengths), sum(lengths)
        mk = lambda h: torch.randn(total, h, d, device="cuda", generator=g).bfloat16()
        q, k, v, do = mk(hq), mk(hkv), mk(hkv), mk(hq)
        for recipe, modes in (("bf16", ["-"]), ("mxfp8", ["fast", "precise", "mx"]),
                              ("nvfp4_fp8", ["fast", "precise"])):
            ref = attention_forward_backward(flamia.reference_attention, q, k, v, do, cu,
                                             recipe=recipe)
            for mode in modes:
                set_mma("fast" if mode == "-" else mode)
                t = time.time()
                try:
                    ours = attention_forward_backward(
                        lambda *a: flamia.attention(*a, total, recipe=recipe, impl="triton"),
                        q, k, v, do, cu)
                except Exception as e:  # e.g. a triton without dot_scaled for this GPU
                    print(f"{recipe:9} D={d:3} mma={mode:7} failed: {type(e).__name__}: "
                          f"{str(e).splitlines()[0][:160]}", flush=True)
                    continue
                rel = [((a.float() - b.float()).norm() / b.float().norm()).item()
                       for a, b in zip(ours, ref)]
                nan = [int(torch.isnan(a).sum()) for a in ours]
                print(f"{recipe:9} D={d:3} mma={mode:7} kernel vs reference recipe rel "
                      f"O/dQ/dK/dV: " + " ".join(f"{r:.2e}" for r in rel) + f" nans {nan} "
                      f"{time.time() - t:.0f}s", flush=True)
    if args.no_timing:
        return
    from triton.testing import do_bench

    total, h, d = 16384, 16, 128
    cu = _cu([total])
    mk = lambda: torch.randn(total, h, d, device="cuda", generator=g).bfloat16().requires_grad_()
    q, k, v = mk(), mk(), mk()
    do = torch.randn(total, h, d, device="cuda", generator=g).bfloat16()
    flops = 3.5 * 4.0 * h * d * total * (total + 1) / 2
    for recipe, mode in (("bf16", "fast"), ("mxfp8", "fast"), ("mxfp8", "precise"),
                         ("nvfp4_fp8", "fast")):
        set_mma(mode)
        fn = lambda: flamia.attention(q, k, v, cu, total, recipe=recipe, impl="triton").backward(do)
        ms = do_bench(fn, warmup=20, rep=100, grad_to_none=[q, k, v], return_mode="median")
        print(f"timing one 16k doc H=16 D=128 {recipe:9} mma={mode:7}: fwd+bwd {ms:.3f} ms "
              f"{flops / ms * 1e-9:.0f} TF/s (FLAMIA_AUTOTUNE={os.environ.get('FLAMIA_AUTOTUNE')})",
              flush=True)
    set_mma("fast")


if __name__ == "__main__":
    main()
