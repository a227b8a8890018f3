"""GPU timing of the FP8 forward's Q/K/V quantizer (flamia.kernels.quantize.quantize_qkv) per
recipe, with its outputs checked against the reference quantizer, bit for bit.

    PYTHONPATH=$PWD python -m bench.quantizer [--tokens 32768] [--heads 16] [--kv-heads 16]
        [--d 128] [--nvfp4-warps 4 8] [--baseline OLD_QUANTIZE.py] [--rounds 3] [--out FILE]

Each row is one launch configuration: the recipe's input scaling (mx: mxfp8's E8M0; nvfp4: Q and
K in NVFP4 as in nvfp4_fp8, V in MX; fp32: fp8_rowwise), the NVFP4 tiles' warps, and which copy
of the module runs (``--baseline`` names another version of flamia/kernels/quantize.py, e.g.
``git show REV:flamia/kernels/quantize.py > /tmp/q.py``, to time it in the same process on the
same inputs). Times are ``triton.testing.do_bench`` medians, best of ``--rounds`` alternating
rounds (the GPU slows as it heats); GB/s counts the bytes read and written once. Every
configuration's Q8, K8, V8, V's token-major copy and scales must equal
``flamia.reference.quantize_operand``'s values bit for bit (zeros' signs included); the run exits
1 where the current module's do not (a baseline's differences are only reported).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys

import torch
from triton.testing import do_bench

from flamia.kernels import quantize as current
from flamia.reference import quantize_operand

SCALINGS = {"mx": ("mx_token", "mx_token"), "nvfp4": ("nvfp4_token", "mx_token"),
            "fp32": ("fp32_token", "fp32_token")}


def _load(path: str):
    spec = importlib.util.spec_from_file_location("baseline_quantize", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _bits(t: torch.Tensor) -> torch.Tensor:
    """fp32 bit patterns of a tensor's values (E4M3 bytes, bf16 NVFP4 values or scales)."""
    return t.float().contiguous().view(torch.int32)


def _check(outs, q, k, v, scaling) -> list[str]:
    """Names of the outputs that differ from the reference quantizer's values, bit for bit."""
    q8, sq, k8, v8, vt8, skv = outs
    qk, vs = SCALINGS[scaling]
    bad = []
    for name, data, scale, x, how in (("Q", q8, sq.t(), q, qk), ("K", k8, skv[..., 0].t(), k, qk),
                                      ("V", v8, skv[..., 1].t(), v, vs)):
        ref_data, ref_scale = quantize_operand(x, how)
        if not torch.equal(_bits(data), _bits(ref_data)):
            bad.append(f"{name} data")
        if not torch.equal(_bits(scale), _bits(ref_scale)):
            bad.append(f"{name} scales")
        if name == "V" and not torch.equal(_bits(vt8[..., : x.shape[0]].permute(2, 0, 1)),
                                           _bits(ref_data)):
            bad.append("V token-major copy")
    return bad


def _bytes(t: int, hq: int, hkv: int, d: int, scaling: str) -> int:
    qk_out = 2 if scaling == "nvfp4" else 1  # NVFP4 values sit in bf16 containers on Hopper
    read = 2 * t * (hq + 2 * hkv) * d
    written = t * (hq + hkv) * d * qk_out + 2 * t * hkv * d + 4 * t * (hq + 2 * hkv)
    return read + written


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=32768)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--kv-heads", type=int, default=16)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--nvfp4-warps", type=int, nargs="+", default=[4, 8])
    ap.add_argument("--baseline", help="another version of flamia/kernels/quantize.py to time")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", help="also write the table to this file")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("bench.quantizer times GPU kernels: no CUDA device here")

    g = torch.Generator().manual_seed(0)
    mk = lambda h: torch.randn(args.tokens, h, args.d, generator=g).bfloat16().cuda()
    q, k, v = mk(args.heads), mk(args.kv_heads), mk(args.kv_heads)
    q[0, 0, :7] = -1e-3  # elements that round to -0 (sign of zero checked too)

    modules = [("current", current)]
    if args.baseline:
        modules.insert(0, ("baseline", _load(args.baseline)))
    configs = []  # (label, module, scaling, nvfp4 warps)
    for label, module in modules:
        for scaling in SCALINGS:
            for warps in (args.nvfp4_warps if scaling == "nvfp4" else [None]):
                if scaling == "nvfp4" and not hasattr(module, "NVFP4_WARPS") and warps != 4:
                    continue  # a module from before the setting launched with 4 warps
                configs.append((label, module, scaling, warps))

    def call(module, scaling, warps):
        if warps is not None and hasattr(module, "NVFP4_WARPS"):
            module.NVFP4_WARPS = warps
        return module.quantize_qkv(q, k, v, qk_nvfp4=scaling == "nvfp4",
                                   fp32_scale=scaling == "fp32")

    default_warps = getattr(current, "NVFP4_WARPS", None)
    failed = False
    checks = {}
    for label, module, scaling, warps in configs:
        bad = _check(call(module, scaling, warps), q, k, v, scaling)
        checks[(label, scaling, warps)] = ", ".join(bad) if bad else "bit for bit"
        failed |= bool(bad) and label == "current"
    best = {}
    for _ in range(args.rounds):
        for label, module, scaling, warps in configs:
            ms = do_bench(lambda: call(module, scaling, warps), return_mode="median")
            key = (label, scaling, warps)
            best[key] = min(best.get(key, float("inf")), ms)
    if default_warps is not None:
        current.NVFP4_WARPS = default_warps

    lines = [f"bench.quantizer on {torch.cuda.get_device_name()}, torch {torch.__version__}; "
             f"T={args.tokens}, Hq={args.heads}, Hkv={args.kv_heads}, D={args.d}; command: "
             f"python -m bench.quantizer {' '.join(argv if argv is not None else sys.argv[1:])}",
             "| module | scaling | NVFP4 warps | ms | GB/s | against the reference |",
             "|---|---|---:|---:|---:|---|"]
    for (label, scaling, warps), ms in best.items():
        gbs = _bytes(args.tokens, args.heads, args.kv_heads, args.d, scaling) / ms / 1e6
        lines.append(f"| {label} | {scaling} | {warps or '-'} | {ms:.3f} | {gbs:.0f} | "
                     f"{checks[(label, scaling, warps)]} |")
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
