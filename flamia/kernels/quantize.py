"""Fused per-(token, head) MX quantization in Triton: E4M3 data, E8M0 scales, transposed copy.

One pass over x [T, H, D] (bf16) writes
    x8_THD  [T, H, D]  E4M3 values
    s_HT    [H, T]     float32 power-of-two scales 2^ceil(log2(amax / 448)) (E8M0 values; 1 for
                       an all-zero row)
    xt8_HDT [H, D, T_pad]  the same bytes transposed, zero-padded along T (when asked for):
                       Hopper's FP8 MMA reads its B operand K-major, so a matmul contracting over
                       tokens (P V, dS K, P^T dO, dS^T Q) reads this copy; same values, other
                       layout.
The transposed tile is stored by the quantizer itself (FLAMIA_FP8_TRANSPOSE=fused, the default),
from the tile's bytes read back after a CTA barrier: transposing the freshly converted tile in
registers stored wrong bytes on the H200 with triton 3.6 three times, while it was right in the
interpreter (2026-12-02 through token-contiguous pointers, 76336 of 153600 elements wrong;
2026-12-03 as a tl.trans of the tile's uint8 bitcast, and again after widening it to int32),
whereas a tl.trans of bytes loaded from memory is right (the copy kernel's path). The read-back
comes from L2 (the tile was just written), so x is read from HBM once. bench/transpose_check.py
on the H200, 2026-12-03 (bench/results/transpose_check_20261203_H200.txt): bytes equal to torch's
permute copy; quantize with the transposed store 0.077 ms vs 0.094 ms for quantizer + copy
kernel at T = 32768, 16 heads, D = 128. The separate copy (token_major_copy) remains for NVFP4
data and for the copies the backward makes of Q8 and K8.
Numerics are flamia.formats.quantize_mx(x, E4M3, block_dim=-1) exactly (bit-exact on the GPU).
The FP8 forward quantizes Q, K and V in one launch (quantize_qkv: the same tile code per tensor,
K's and V's scales written as the [Hkv, T, 2] rows the attention kernels read): the host needs
about 60 us per launch, which short documents do not hide (bench/results/cpu_overhead_20261203_H200.txt).

Storage: float8_e4m3fn on the GPU. Under the Triton interpreter (CPU) the fp32 -> fp8 cast is
wrong for values near and below the smallest normal (checked with triton 3.9), so there the
E4M3 rounding is done by hand in fp32 and the values are stored in bfloat16, which holds every
E4M3 value exactly: same values, wider container. The interpreter also flushes fp32-subnormal
inputs (|x| < 2^-126) to zero, so rows whose amax is that small are checked on the GPU only.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
IS_INTERPRETER = tl.constexpr(INTERPRET)
FP8_STORAGE = torch.bfloat16 if INTERPRET else torch.float8_e4m3fn
E4M3_MAX = 448.0
# A timing experiment, never a recipe: FLAMIA_UNSAFE_NO_INREG_SCALES=1 (read at import) makes the
# FP8 kernels cast P' and dS' (their per-token folds included) to E4M3 with no per-row scale, so
# their results are WRONG (values underflow). It measures what the recipe's in-register row
# scales cost (row maxima, E8M0 exponents, the rescaling multiply): the upper bound of what any
# cheaper in-register scale rule could gain. ``flamia.ops`` warns when it is set.
INREG_ROW_SCALES = tl.constexpr(os.environ.get("FLAMIA_UNSAFE_NO_INREG_SCALES", "0") != "1")


@triton.jit
def e8m0_exponent(amax):
    """ceil(log2(amax / 448)) from the bits of amax (amax >= 0, finite), clamped to E8M0's
    [-127, 127]; 0 where amax == 0. 448 = 1.75 * 2^8: one power of two more when amax's mantissa
    exceeds 1.75 (fraction bits > 0x600000)."""
    bits = amax.to(tl.uint32, bitcast=True)
    e = ((bits >> 23) & 0xFF).to(tl.int32) - 127
    frac = bits & 0x7FFFFF
    exp = e - 8 + (frac > 0x600000).to(tl.int32)
    exp = tl.minimum(tl.maximum(exp, -127), 127)
    return tl.where(amax == 0.0, 0, exp)


@triton.jit
def pow2(exp):
    """2^exp as fp32 for integer exp in [-127, 127] (-127 is the fp32 subnormal 0x00400000)."""
    normal = ((tl.maximum(exp, -126) + 127).to(tl.uint32) << 23).to(tl.float32, bitcast=True)
    return tl.where(exp == -127, 5.877471754111438e-39, normal)


@triton.jit
def e8m0_scale(amax):
    """The E8M0 scale 2^e8m0_exponent(amax) as fp32 (1 where amax == 0)."""
    return pow2(e8m0_exponent(amax))


@triton.jit
def round_to_grid(x, MANTISSA_BITS: tl.constexpr, MIN_NORMAL_EXP: tl.constexpr,
                  MAX_NORMAL: tl.constexpr):
    """Saturating round-to-nearest-even of fp32 x to a small float format, in exact fp32
    arithmetic (flamia.formats.round_to_format, bit for bit, the sign of a zero included): clamp,
    then round to a multiple of quantum = 2^(max(exponent of x, MIN_NORMAL_EXP) - MANTISSA_BITS).

    The rounding is fp32's own: magic = 1.5 * 2^23 * quantum has quantum as its ulp, and x + magic
    stays in magic's binade (|x| < 2^(MANTISSA_BITS + 1) * quantum, far below magic / 3), so
    x + magic rounds x to the grid, ties to even (magic / quantum is even), and subtracting magic
    is exact. Two FADDs per element instead of a division, two floors and a three-way select."""
    x = tl.minimum(tl.maximum(x, -MAX_NORMAL), MAX_NORMAL)
    bits = x.to(tl.uint32, bitcast=True)
    # magic's bits from x's exponent field in place: max(field, smallest normal's) + (23 - M) in
    # the exponent, 0x400000 the mantissa's 0.5 (the clamp above keeps the field small)
    field = tl.maximum(bits & 0x7F800000, (MIN_NORMAL_EXP + 127) << 23)
    magic = (field + (((23 - MANTISSA_BITS) << 23) | 0x400000)).to(tl.float32, bitcast=True)
    r = (x + magic) - magic
    # A negative x that rounds to zero gives +0 here; torch.round (the reference) gives -0.
    return (r.to(tl.uint32, bitcast=True) | (bits & 0x80000000)).to(tl.float32, bitcast=True)


@triton.jit
def round_e4m3(x):
    """Saturating round-to-nearest-even to E4M3 (input already divided by its scale). Returns
    the FP8 storage type: float8e4nv on the GPU (hardware cvt.rn.satfinite), bf16 holding the
    E4M3 value under the interpreter (rounding by hand)."""
    if IS_INTERPRETER:
        return round_to_grid(x, 3, -6, 448.0).to(tl.bfloat16)
    # cvt.rn.satfinite saturates to +-448 itself (and keeps NaN, like the reference's clamp): an
    # explicit clamp would cost two instructions per element in the attention kernels' loops.
    return x.to(tl.float8e4nv)


@triton.jit
def _quantize_tile(x_ptr, data_ptr, s_ptr, t_ptr, head, stride_xt, stride_xh, stride_dt,
                   stride_dh, stride_sh, stride_st, stride_th, stride_td, total,
                   HEAD_DIM: tl.constexpr, BLOCK_T: tl.constexpr, NVFP4: tl.constexpr,
                   TRANSPOSE: tl.constexpr, FP32_SCALE: tl.constexpr):
    """One pass over the [BLOCK_T, D] tile (grid axis 0) of one head. MX (NVFP4=False): E8M0
    scale per (token, head), E4M3 data; FP32_SCALE (fp8_rowwise): the fp32 scale amax / 448
    instead, E4M3 data x / scale. NVFP4: s = amax / (6 * 448) per (token, head); per 16
    elements b = UE4M3(amax_16 / (6 s)); e = E2M1(x / (b s)); stores e * b (exact in bf16) and s.
    Same operations in the same order as flamia.reference.quantize_operand. Scales go to
    s[head * stride_sh + token * stride_st]. TRANSPOSE (MX only; the grid then covers T_pad
    tokens): also store the tile token-major into t [H, D, T_pad] (zeros past T, where x was
    loaded as 0), see the module docstring. Returns the tile's data and scales (the values
    stored) for a caller that uses them further (kernels.attention's FP8 backward prologue)."""
    offs_t = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    offs_d = tl.arange(0, HEAD_DIM)
    ok = offs_t < total
    rows = offs_t.to(tl.int64)[:, None]
    x = tl.load(x_ptr + rows * stride_xt + head * stride_xh + offs_d[None, :], mask=ok[:, None],
                other=0.0).to(tl.float32)
    if NVFP4:
        # div_rn: IEEE division as in the reference (triton's "/" on fp32 is the approximate
        # div.full.f32 on NVIDIA GPUs; exact only for the power-of-two divisors of the MX path).
        scale = tl.math.div_rn(tl.max(tl.abs(x), 1), 2688.0)
        scale = tl.where(scale == 0.0, 1.0, scale)
        xb = tl.reshape(x, (BLOCK_T, HEAD_DIM // 16, 16))
        bamax = tl.max(tl.abs(xb), 2)
        b = round_to_grid(tl.math.div_rn(bamax, 6.0 * scale[:, None]), 3, -6, 448.0)  # UE4M3
        safe = tl.where(b == 0.0, 1.0, b * scale[:, None])
        e = round_to_grid(tl.math.div_rn(xb, safe[:, :, None]), 1, 0, 6.0)  # E2M1
        data = tl.where(b[:, :, None] == 0.0, 0.0, e * b[:, :, None])
        data = tl.reshape(data, (BLOCK_T, HEAD_DIM)).to(tl.bfloat16)
    elif FP32_SCALE:
        scale = tl.math.div_rn(tl.max(tl.abs(x), 1), 448.0)  # IEEE, as the reference
        scale = tl.where((scale == 0.0) | (scale == float("inf")), 1.0, scale)
        data = round_e4m3(tl.math.div_rn(x, scale[:, None]))
    else:
        scale = e8m0_scale(tl.max(tl.abs(x), 1))
        data = round_e4m3(x / scale[:, None])  # exact division by a power of two
    data_ptrs = data_ptr + rows * stride_dt + head * stride_dh + offs_d[None, :]
    tl.store(data_ptrs, data, mask=ok[:, None])
    tl.store(s_ptr + head * stride_sh + offs_t * stride_st, scale, mask=ok)
    if TRANSPOSE:
        t_ptrs = (t_ptr + head * stride_th + offs_d.to(tl.int64)[:, None] * stride_td
                  + offs_t[None, :])
        if IS_INTERPRETER:  # bf16 storage of E4M3 values (module docstring): transpose as is
            tl.store(t_ptrs, tl.trans(data))
        else:  # the bytes just stored, read back by the whole CTA (module docstring: why)
            tl.debug_barrier()
            back = tl.load(data_ptrs.to(tl.pointer_type(tl.uint8)), mask=ok[:, None], other=0)
            tl.store(t_ptrs.to(tl.pointer_type(tl.uint8)), tl.trans(back))
    return data, scale


@triton.jit
def _quantize_per_token_kernel(
    x_ptr, data_ptr, s_ptr, t_ptr, stride_xt, stride_xh, stride_dt, stride_dh, stride_sh,
    stride_th, stride_td, total,
    HEAD_DIM: tl.constexpr, BLOCK_T: tl.constexpr, NVFP4: tl.constexpr, TRANSPOSE: tl.constexpr,
    FP32_SCALE: tl.constexpr,
):
    """One tensor: grid (tiles, heads), see _quantize_tile."""
    _quantize_tile(x_ptr, data_ptr, s_ptr, t_ptr, tl.program_id(1), stride_xt, stride_xh,
                   stride_dt, stride_dh, stride_sh, 1, stride_th, stride_td, total,
                   HEAD_DIM, BLOCK_T, NVFP4, TRANSPOSE, FP32_SCALE)


@triton.jit
def _quantize_qkv_kernel(
    q_ptr, k_ptr, v_ptr, q8_ptr, k8_ptr, v8_ptr, sq_ptr, skv_ptr, vt_ptr,
    stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh,
    stride_q8t, stride_q8h, stride_k8t, stride_k8h, stride_v8t, stride_v8h,
    stride_sqh, stride_skvh, stride_vth, stride_vtd, total,
    H_Q: tl.constexpr, H_KV: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_T: tl.constexpr,
    QK_NVFP4: tl.constexpr, TRANSPOSE_V: tl.constexpr, FP32_SCALE: tl.constexpr,
):
    """Q, K and V of the FP8 forward in one launch: grid (tiles, Hq + 2 Hkv), the second axis
    walks Q's heads, then K's, then V's. K's and V's scales go to the two columns of skv
    [Hkv, T, 2] (the rows the attention kernels read); V's token-major copy to vt (TRANSPOSE_V).
    FP32_SCALE: fp32 per-token scales for all three (fp8_rowwise; not with QK_NVFP4)."""
    h = tl.program_id(1)
    if h < H_Q:
        _quantize_tile(q_ptr, q8_ptr, sq_ptr, q8_ptr, h, stride_qt, stride_qh, stride_q8t,
                       stride_q8h, stride_sqh, 1, 0, 0, total, HEAD_DIM, BLOCK_T, QK_NVFP4, False,
                       FP32_SCALE)
    elif h < H_Q + H_KV:
        _quantize_tile(k_ptr, k8_ptr, skv_ptr, k8_ptr, h - H_Q, stride_kt, stride_kh, stride_k8t,
                       stride_k8h, stride_skvh, 2, 0, 0, total, HEAD_DIM, BLOCK_T, QK_NVFP4, False,
                       FP32_SCALE)
    else:
        _quantize_tile(v_ptr, v8_ptr, skv_ptr + 1, vt_ptr, h - H_Q - H_KV, stride_vt, stride_vh,
                       stride_v8t, stride_v8h, stride_skvh, 2, stride_vth, stride_vtd, total,
                       HEAD_DIM, BLOCK_T, False, TRANSPOSE_V, FP32_SCALE)


# Token-major copies are padded along T to a multiple of TOKEN_PAD with zeros: the attention
# kernels then load their tiles without a mask along the (contiguous) token axis, so the loads
# vectorize and pipeline (a mask along the contiguous axis makes triton fall back to 1-byte
# loads); the zeros keep 0 * padding finite for the masked-out keys and queries.
TOKEN_PAD = 128
# How the quantizer's token-major copy is made (FLAMIA_FP8_TRANSPOSE): "fused" (default): stored
# by the quantizer itself; "triton": the copy kernel below after the quantizer; "torch": torch's
# strided copy (the reference bytes, 5x slower). bench/transpose_check.py compares them on the GPU.
TRANSPOSE_MODES = ("fused", "triton", "torch")
# Warps of a quantizer launch with NVFP4 tiles. Its exact divisions and roundings keep many fp32
# temporaries live: with 4 warps a 64-token tile takes 168 registers per thread (sm_90, triton
# 3.6), two CTAs per SM, too few loads in flight to hide their latency; with 8 warps, 80.
NVFP4_WARPS = 8


@triton.jit
def _token_major_copy_tile(x_ptr, out_ptr, head, stride_xt, stride_xh, stride_oh, stride_od,
                           total, HEAD_DIM: tl.constexpr, BLOCK_T: tl.constexpr):
    """out[h, d, t] = x[t, h, d] (0 for t >= total) for one [BLOCK_T, D] tile of one head."""
    offs_t = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    offs_d = tl.arange(0, HEAD_DIM)
    ok = offs_t < total
    x = tl.load(x_ptr + offs_t.to(tl.int64)[:, None] * stride_xt + head * stride_xh
                + offs_d[None, :], mask=ok[:, None], other=0)
    out = out_ptr + head * stride_oh + offs_d.to(tl.int64)[:, None] * stride_od + offs_t[None, :]
    tl.store(out, tl.trans(x))


@triton.jit
def _token_major_copy_kernel(x_ptr, y_ptr, xo_ptr, yo_ptr, stride_xt, stride_xh, stride_yt,
                             stride_yh, stride_xoh, stride_xod, stride_yoh, stride_yod, total,
                             H_X: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_T: tl.constexpr):
    """Token-major copies of one or two tensors in one launch: grid (tiles, H_X + H_Y), the
    first H_X heads from x, the rest from y."""
    head = tl.program_id(1)
    if head < H_X:
        _token_major_copy_tile(x_ptr, xo_ptr, head, stride_xt, stride_xh, stride_xoh, stride_xod,
                               total, HEAD_DIM, BLOCK_T)
    else:
        _token_major_copy_tile(y_ptr, yo_ptr, head - H_X, stride_yt, stride_yh, stride_yoh,
                               stride_yod, total, HEAD_DIM, BLOCK_T)


def transpose_mode() -> str:
    mode = os.environ.get("FLAMIA_FP8_TRANSPOSE", "fused")
    if mode not in TRANSPOSE_MODES:
        raise ValueError(f"FLAMIA_FP8_TRANSPOSE={mode!r}; accepted: {TRANSPOSE_MODES}")
    return mode


def _padded(total: int) -> int:
    return triton.cdiv(total, TOKEN_PAD) * TOKEN_PAD


def token_major_copy(data: torch.Tensor) -> torch.Tensor:
    """[T, H, D] -> contiguous [H, D, T_pad], the same bytes, T_pad = T rounded up to TOKEN_PAD,
    zeros after T: the Triton copy above (bytes equal to torch's permute copy on the H200,
    quantize + copy 0.094 ms vs 0.470 ms with torch's copy at T = 32768, 16 heads, D = 128,
    bench/results/transpose_check_20261203_H200.txt), or torch's copy with
    FLAMIA_FP8_TRANSPOSE=torch."""
    return token_major_copies(data)[0]


def token_major_copies(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """token_major_copy of one or two [T, H, D] tensors of one dtype, T and D (the backward's Q8
    and K8) in one launch."""
    if not 1 <= len(tensors) <= 2 or len({(t.dtype, t.shape[0], t.shape[2]) for t in tensors}) != 1:
        raise ValueError("token_major_copies takes one or two [T, H, D] tensors of one dtype, T "
                         f"and D; got {[(t.dtype, tuple(t.shape)) for t in tensors]}")
    total, _, d = tensors[0].shape
    padded = _padded(total)
    if transpose_mode() == "torch":
        outs = []
        for t in tensors:
            out = torch.empty((t.shape[1], d, padded), dtype=t.dtype, device=t.device)
            out[:, :, :total] = t.permute(1, 2, 0)
            out[:, :, total:] = 0
            outs.append(out)
        return tuple(outs)
    srcs = [t.view(torch.uint8) if t.element_size() == 1 else t for t in tensors]
    outs = [torch.empty((s.shape[1], d, padded), dtype=s.dtype, device=s.device) for s in srcs]
    x, y = srcs[0], srcs[-1]
    xo, yo = outs[0], outs[-1]
    heads = sum(s.shape[1] for s in srcs)
    block_t = 64
    _token_major_copy_kernel[(padded // block_t, heads)](
        x, y, xo, yo, x.stride(0), x.stride(1), y.stride(0), y.stride(1), xo.stride(0),
        xo.stride(1), yo.stride(0), yo.stride(1), total,
        H_X=x.shape[1], HEAD_DIM=d, BLOCK_T=block_t, num_warps=4,
    )
    return tuple(o.view(t.dtype) for o, t in zip(outs, tensors))


def quantizer_grid(total: int, transposed: bool) -> tuple[int, int]:
    """(BLOCK_T, tiles along T) of a quantizer launch; with the transposed store the tiles cover
    the padded length (BLOCK_T divides TOKEN_PAD)."""
    block_t = 32 if INTERPRET else 64
    return block_t, triton.cdiv(_padded(total) if transposed else total, block_t)


def _check_nvfp4_head_dim(d: int):
    if d % 16:
        raise ValueError(f"nvfp4 needs the head dim to be a multiple of 16, got {d}")


def _token_buffers(x: torch.Tensor, storage: torch.dtype, transposed: bool):
    """Empty (data [T, H, D], token-contiguous copy [H, D, T_pad] or None, scales [H, T] float32)
    for a per-(token, head) quantizer's outputs of x [T, H, D]."""
    total, h, d = x.shape
    return (torch.empty((total, h, d), dtype=storage, device=x.device),
            torch.empty((h, d, _padded(total)), dtype=storage, device=x.device)
            if transposed else None,
            torch.empty((h, total), dtype=torch.float32, device=x.device))


def mx_token_buffers(x: torch.Tensor):
    """quantize_mx_token's (or quantize_fp32_token's) outputs of x, empty, for a kernel that
    quantizes x itself (_quantize_tile with its transposed store)."""
    return _token_buffers(x, FP8_STORAGE, True)


def _per_token_quantize(x: torch.Tensor, nvfp4: bool, transposed: bool, fp32_scale=False):
    """Launch the per-(token, head) quantizer; (data, token-contiguous copy, scale [H, T])."""
    storage = torch.bfloat16 if nvfp4 else FP8_STORAGE
    assert x.stride(-1) == 1
    total, h, d = x.shape
    fused = transposed and not nvfp4 and transpose_mode() == "fused"
    data, data_t, scale = _token_buffers(x, storage, fused)
    block_t, tiles = quantizer_grid(total, fused)
    # With fused, the quantizer writes the token-major copy too; otherwise an unused pointer.
    data_t = data_t if fused else data
    _quantize_per_token_kernel[(tiles, h)](
        x, data, scale, data_t, x.stride(0), x.stride(1), data.stride(0), data.stride(1),
        scale.stride(0), data_t.stride(0), data_t.stride(1), total,
        HEAD_DIM=d, BLOCK_T=block_t, NVFP4=nvfp4, TRANSPOSE=fused, FP32_SCALE=fp32_scale,
        num_warps=NVFP4_WARPS if nvfp4 else 4,
    )
    if fused:
        return data, data_t, scale
    return data, token_major_copy(data) if transposed else None, scale


def quantize_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, qk_nvfp4: bool,
                 fp32_scale: bool = False):
    """The FP8 forward's quantizers in one launch: (q8, sq [Hq, T], k8, v8, vt8 [Hkv, D, T_pad],
    skv [Hkv, T, 2] = K's and V's scales as rows). Q and K are NVFP4 (qk_nvfp4, bf16 containers)
    or MXFP8, V is MXFP8 with its token-major copy; the same bytes as quantize_nvfp4_token /
    quantize_mx_token on each tensor (tests/test_kernels_fp8.py). fp32_scale (fp8_rowwise): all
    three as quantize_fp32_token."""
    if qk_nvfp4 and fp32_scale:
        raise ValueError("quantize_qkv: qk_nvfp4 and fp32_scale are two recipes; pick one")
    for t in (q, k, v):
        assert t.stride(-1) == 1
    if qk_nvfp4:
        _check_nvfp4_head_dim(q.shape[-1])
    total, hq, d = q.shape
    hkv = k.shape[1]
    dev = q.device
    qk_storage = torch.bfloat16 if qk_nvfp4 else FP8_STORAGE
    q8 = torch.empty((total, hq, d), dtype=qk_storage, device=dev)
    k8 = torch.empty((total, hkv, d), dtype=qk_storage, device=dev)
    v8 = torch.empty((total, hkv, d), dtype=FP8_STORAGE, device=dev)
    sq = torch.empty((hq, total), dtype=torch.float32, device=dev)
    skv = torch.empty((hkv, total, 2), dtype=torch.float32, device=dev)
    fused = transpose_mode() == "fused"
    block_t, tiles = quantizer_grid(total, fused)
    vt8 = torch.empty((hkv, d, _padded(total)), dtype=FP8_STORAGE, device=dev) if fused else v8
    _quantize_qkv_kernel[(tiles, hq + 2 * hkv)](
        q, k, v, q8, k8, v8, sq, skv, vt8, q.stride(0), q.stride(1), k.stride(0), k.stride(1),
        v.stride(0), v.stride(1), q8.stride(0), q8.stride(1), k8.stride(0), k8.stride(1),
        v8.stride(0), v8.stride(1), sq.stride(0), skv.stride(0), vt8.stride(0), vt8.stride(1),
        total, H_Q=hq, H_KV=hkv, HEAD_DIM=d, BLOCK_T=block_t, QK_NVFP4=qk_nvfp4,
        TRANSPOSE_V=fused, FP32_SCALE=fp32_scale, num_warps=NVFP4_WARPS if qk_nvfp4 else 4,
    )
    if not fused:
        vt8 = token_major_copy(v8)
    return q8, sq, k8, v8, vt8, skv


def quantize_nvfp4_token(x: torch.Tensor, transposed: bool = True):
    """(data [T, H, D] bf16 = E2M1 x UE4M3 values, token-contiguous copy [H, D, T_pad] or None,
    per-token scale [H, T] float32) of x [T, H, D]; D a multiple of 16."""
    _check_nvfp4_head_dim(x.shape[-1])
    return _per_token_quantize(x, True, transposed)


def quantize_mx_token(x: torch.Tensor, transposed: bool = True):
    """(x8 [T, H, D], xt8 [H, D, T_pad] or None, scale [H, T] float32) of x [T, H, D]."""
    return _per_token_quantize(x, False, transposed)


def quantize_fp32_token(x: torch.Tensor, transposed: bool = True):
    """quantize_mx_token with fp8_rowwise's fp32 scales amax / 448 (not E8M0): (x8, xt8 or None,
    scale [H, T] float32), flamia.reference.quantize_operand(x, "fp32_token")'s values."""
    return _per_token_quantize(x, False, transposed, fp32_scale=True)
