"""Pure-PyTorch packed-document attention: the oracle every kernel is tested against.

Layout (varlen, as in FlashAttention's varlen API), shape-suffix legend:
    T  total tokens of the packed batch      Hq / Hkv  query / key-value heads
    D  head dim                              S  number of segments (documents pieces)
    q_THD [T, Hq, D], k_THD / v_THD [T, Hkv, D], cu_seqlens_S1 [S + 1] int32 (0, ..., T)

Semantics (DESIGN.md s2): query i attends key j iff seg(i) == seg(j) and j <= i. GQA: query head
h reads kv head h // (Hq / Hkv).

Every recipe of ``flamia.recipes`` is computed here as *fake quantization*: each operand is
replaced by its exactly representable quantized values (data times scale), and the seven matmuls
run in float32 on those values. A kernel computing the same recipe multiplies the same E4M3
values exactly (fp8 products are exact in fp32) and differs from this code only in the order of
fp32 accumulation. The backward is written out matmul by matmul (no autograd through the forward):
it recomputes S from the same quantized Q and K and uses the forward's LSE, so it is the gradient
of the function the forward computed, with straight-through quantizers.

Softmax convention shared with the kernels: base-2 logits x = S * log2(e), and the row maximum
is rounded *up to an integer* before exp2. The online softmax of a kernel then rescales by exact
powers of two, and rounding P to bf16 or E4M3-with-E8M0 gives the same relative pattern whatever
order the key tiles arrive in.

Memory is O(H * T^2) per call (dense masked matrices, processed a few heads at a time): this is an
oracle for tests, probes and small CPU models, not a fast path.
"""

from __future__ import annotations

import torch

from .formats import E2M1, E4M3, UE4M3, quantize_e4m3_rows, quantize_mx, round_to_format
from .recipes import Recipe, get_recipe

__all__ = [
    "segment_ids",
    "document_causal_mask",
    "quantize_operand",
    "reference_attention",
    "exact_attention",
    "attention_forward_backward",
]

LOG2E = 1.4426950408889634
SEQBLOCK = 32  # tokens per scale block of the mx_seqblock control (the MX block size)
NVFP4_BLOCK = 16
_MAX_DENSE_ELEMENTS = 1 << 26  # per chunk of heads: bounds the reference's memory


def segment_ids(cu_seqlens: torch.Tensor, total: int) -> torch.Tensor:
    """seg[t] = index of the segment holding token t, from cu_seqlens; int64 [T]."""
    marks = torch.zeros(total + 1, dtype=torch.int64, device=cu_seqlens.device)
    marks[cu_seqlens[1:-1].long()] = 1
    return torch.cumsum(marks, 0)[:total]


def document_causal_mask(cu_seqlens: torch.Tensor, total: int) -> torch.Tensor:
    """Boolean [T, T]: True where query i may attend key j (same segment and j <= i)."""
    seg = segment_ids(cu_seqlens, total)
    idx = torch.arange(total, device=cu_seqlens.device)
    return (seg[:, None] == seg[None, :]) & (idx[None, :] <= idx[:, None])


# --------------------------------------------------------------------------------------------
# Input operand quantization: (data, token_scale) with data * token_scale[..., None] = values
# --------------------------------------------------------------------------------------------


def _quantize_nvfp4_token(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """NVFP4 with a per-(token, head) fp32 second-level scale instead of a per-tensor one.

    s_tok = amax_token / (6 * 448); block scale b = UE4M3(amax_16 / (6 * s_tok)); element
    e = E2M1(x / (b * s_tok)). Returns data = e * b (exactly representable in bf16: a 2-bit times a
    4-bit significand) and s_tok. A block whose scale rounds to 0 has data 0.
    """
    T, H, D = x.shape
    if D % NVFP4_BLOCK:
        raise ValueError(f"nvfp4 needs the head dim to be a multiple of 16, got {D}")
    amax_tok = x.abs().amax(dim=-1)
    # Divide by a tensor, not a Python scalar: on CUDA torch turns division by a scalar into a
    # multiplication by its reciprocal, which is not the IEEE quotient (the kernel's div_rn is).
    s_tok = amax_tok / torch.full_like(amax_tok, E2M1.max_normal * UE4M3.max_normal)
    s_tok = torch.where(s_tok == 0, torch.ones_like(s_tok), s_tok)
    xb = x.reshape(T, H, D // NVFP4_BLOCK, NVFP4_BLOCK)
    bamax = xb.abs().amax(dim=-1, keepdim=True)
    b = round_to_format(bamax / (E2M1.max_normal * s_tok[..., None, None]), UE4M3)
    denom = b * s_tok[..., None, None]
    e = round_to_format(xb / torch.where(b == 0, torch.ones_like(denom), denom), E2M1)
    data = torch.where(b == 0, torch.zeros_like(e), e * b)
    return data.reshape(T, H, D), s_tok


def _quantize_seqblock(x: torch.Tensor) -> torch.Tensor:
    """E4M3 with one E8M0 scale per 32 consecutive tokens per (head, channel): the natural MX
    blocking along the token axis, blind to segment boundaries. Returns dequantized values."""
    data, scale = quantize_mx(x, E4M3, block_dim=0, block_size=SEQBLOCK)
    return data * scale.repeat_interleave(SEQBLOCK, dim=0)[: x.shape[0]]


def _quantize_by_amax(x: torch.Tensor, amax: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """E4M3 data x / s with the fp32 scale s = amax / 448 (1 where amax is 0 or not finite);
    amax broadcasts against x once given a trailing axis. Returns (data, s)."""
    # Divide by a tensor, not a Python scalar: IEEE on every device (see _quantize_nvfp4_token).
    s = amax / torch.full_like(amax, E4M3.max_normal)
    s = torch.where((s == 0) | ~torch.isfinite(s), torch.ones_like(s), s)
    return round_to_format(x / s[..., None], E4M3), s


def quantize_operand(x: torch.Tensor, scaling: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantize a [T, H, D] operand by an input scaling of ``flamia.recipes``.

    Returns ``(data, token_scale)``: float32 [T, H, D] and [T, H], with
    ``data * token_scale[..., None]`` the dequantized values. ``token_scale`` is the factor a
    kernel folds into the other operand (or applies to the accumulator); it is 1 where the scaling
    has no per-token factor.
    """
    x = x.to(torch.float32)
    ones = torch.ones(x.shape[:2], dtype=torch.float32, device=x.device)
    if scaling == "bf16":
        return x.to(torch.bfloat16).to(torch.float32), ones
    if scaling == "mx_token":
        data, scale = quantize_mx(x, E4M3, block_dim=-1)  # scale [T, H, 1]
        return data, scale[..., 0]
    if scaling == "nvfp4_token":
        return _quantize_nvfp4_token(x)
    if scaling == "mx_seqblock":
        return _quantize_seqblock(x), ones
    if scaling == "fp32_token":
        return _quantize_by_amax(x, x.abs().amax(dim=-1))
    if scaling == "tensorwise":
        data, s = _quantize_by_amax(x, x.abs().amax()[None])
        return data, ones * s
    raise ValueError(f"unknown input scaling {scaling!r}")


# --------------------------------------------------------------------------------------------
# The seven matmuls, one head chunk at a time (tensors [H, T, ...])
# --------------------------------------------------------------------------------------------


def _round_inreg(x: torch.Tensor, recipe: Recipe | None, fold_cols: torch.Tensor) -> torch.Tensor:
    """Round an in-register operand [H, rows, cols] whose columns contract against an operand
    with per-token scale ``fold_cols`` [H, cols] (already excluded from that operand's data).

    Returns the values to multiply with the other operand's *data*.
    """
    if recipe is None or recipe.inreg == "fp32":  # exact path / diagnostic recipe: no rounding
        return x * fold_cols[:, None, :]
    if recipe.inreg == "bf16":
        # bf16 recipe: scales are 1; P / dS go to the MMA in bf16.
        return (x * fold_cols[:, None, :]).to(torch.bfloat16).to(torch.float32)
    return quantize_e4m3_rows(x * fold_cols[:, None, :], recipe.inreg_group)


def _logits2(qd, sq, kd, sk, mask, scale):
    """Base-2 logits x = S log2(e) with the mask applied (-inf where not visible)."""
    s = torch.matmul(qd, kd.transpose(-1, -2))
    # (S sK) (sQ scale log2 e): the order of the forward and dQ kernels (one rounding for E8M0
    # scales, whose products are exact; fp32 ones round in this order there too)
    x = s * sk[:, None, :] * (sq * (scale * LOG2E))[:, :, None]
    return x.masked_fill(~mask, float("-inf"))


def _forward_chunk(qd, sq, kd, sk, vd, sv, mask, scale, recipe):
    x = _logits2(qd, sq, kd, sk, mask, scale)
    m = torch.ceil(x.amax(dim=-1))  # integer row max: see module docstring
    p = torch.exp2(x - m[..., None])
    l = p.sum(dim=-1)
    pq = _round_inreg(p, recipe, sv)
    o = torch.matmul(pq, vd) / l[..., None]
    return o, m + torch.log2(l)


def _backward_chunk(qd, sq, kd, sk, vd, sv, dod, sdo, do16, v16, o, lse2, mask, scale, recipe,
                    quantized_do):
    x = _logits2(qd, sq, kd, sk, mask, scale)
    p = torch.exp2(x - lse2[..., None])  # masked entries: exp2(-inf) = 0 exactly
    if recipe is not None and recipe.dp_bf16:
        dp = torch.matmul(do16, v16.transpose(-1, -2))
    else:
        # sdO, then sV, in the kernels' order (one rounding each; exact for E8M0 scales, not
        # for fp8_rowwise's fp32 ones)
        dp = torch.matmul(dod, vd.transpose(-1, -2)) * sdo[:, :, None] * sv[:, None, :]
    # delta = rowsum(dO * O) (FlashAttention's identity rowsum(P * dP) = rowsum(dO * O)), with the
    # same dO that dP is computed from: for FP8 recipes the quantized dO', so that every row of dS
    # sums to zero and the backward is the gradient of <O, dO'> (see _backward); its row sum
    # times sdO, the kernels' order.
    if quantized_do:
        delta = (dod * o).sum(dim=-1) * sdo
    else:
        delta = (do16 * o).sum(dim=-1)
    ds = p * (dp - delta[..., None])
    dv = torch.matmul(_round_inreg(p.transpose(-1, -2), recipe, sdo), dod)
    dq = torch.matmul(_round_inreg(ds, recipe, sk), kd) * scale
    dk = torch.matmul(_round_inreg(ds.transpose(-1, -2), recipe, sq), qd) * scale
    return dq, dk, dv


def _head_chunks(hq: int, total: int):
    step = max(1, min(hq, _MAX_DENSE_ELEMENTS // max(1, total * total)))
    return [(h0, min(hq, h0 + step)) for h0 in range(0, hq, step)]


def _prepare(q, k, v, recipe: Recipe | None):
    """Quantized operands in [H, T, D] / [H, T] layout, K and V expanded to the query heads."""
    if recipe is None:
        f64 = lambda t: (
            t.to(torch.float64), torch.ones(t.shape[:2], dtype=torch.float64, device=t.device)
        )
        (qd, sq), (kd, sk), (vd, sv) = f64(q), f64(k), f64(v)
    else:
        (qd, sq), (kd, sk), (vd, sv) = (
            quantize_operand(q, recipe.q),
            quantize_operand(k, recipe.k),
            quantize_operand(v, recipe.v),
        )
    group = q.shape[1] // k.shape[1]
    hm = lambda t: t.movedim(0, 1)  # [T, H, ...] -> [H, T, ...]
    kv_expand = lambda t: hm(t).repeat_interleave(group, dim=0)
    return hm(qd), hm(sq), kv_expand(kd), kv_expand(sk), kv_expand(vd), kv_expand(sv)


def _forward(q, k, v, cu_seqlens, scale, recipe):
    total, hq, _ = q.shape
    mask = document_causal_mask(cu_seqlens.to(q.device), total)
    qd, sq, kd, sk, vd, sv = _prepare(q, k, v, recipe)
    outs, lses = [], []
    for h0, h1 in _head_chunks(hq, total):
        o, lse2 = _forward_chunk(
            qd[h0:h1], sq[h0:h1], kd[h0:h1], sk[h0:h1], vd[h0:h1], sv[h0:h1], mask, scale, recipe
        )
        outs.append(o)
        lses.append(lse2)
    return torch.cat(outs).movedim(0, 1), torch.cat(lses)  # o [T, Hq, D], lse2 [Hq, T]


def _backward(q, k, v, o, lse2, do, cu_seqlens, scale, recipe):
    total, hq, _ = q.shape
    hkv = k.shape[1]
    mask = document_causal_mask(cu_seqlens.to(q.device), total)
    qd, sq, kd, sk, vd, sv = _prepare(q, k, v, recipe)
    work = torch.float64 if recipe is None else torch.float32
    if recipe is None:
        dod, sdo = do.to(work), torch.ones(do.shape[:2], dtype=work, device=do.device)
    else:
        dod, sdo = quantize_operand(do, recipe.do)
    hm = lambda t: t.movedim(0, 1)
    dod, sdo = hm(dod), hm(sdo)
    do16, o16 = hm(do.to(work)), hm(o.to(work))
    # dO as dP = dO V^T sees it: bf16 dO, or the quantized dO' (data dod, scales sdo).
    quantized_do = recipe is not None and recipe.do != "bf16" and not recipe.dp_bf16
    group = hq // hkv
    v16 = hm(v.to(work)).repeat_interleave(group, dim=0)
    dqs, dks, dvs = [], [], []
    for h0, h1 in _head_chunks(hq, total):
        sl = slice(h0, h1)
        dq, dk, dv = _backward_chunk(
            qd[sl], sq[sl], kd[sl], sk[sl], vd[sl], sv[sl], dod[sl], sdo[sl], do16[sl],
            v16[sl], o16[sl], lse2[sl], mask, scale, recipe, quantized_do,
        )
        dqs.append(dq)
        dks.append(dk)
        dvs.append(dv)
    dq = torch.cat(dqs).movedim(0, 1)
    # GQA: the gradient of a kv head is the sum over the query heads that read it.
    dk = torch.cat(dks).reshape(hkv, group, total, -1).sum(1).movedim(0, 1)
    dv = torch.cat(dvs).reshape(hkv, group, total, -1).sum(1).movedim(0, 1)
    return dq, dk, dv


class _ReferenceAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, cu_seqlens, scale, recipe):
        o, lse2 = _forward(q, k, v, cu_seqlens, scale, recipe)
        o = o.to(q.dtype).contiguous()
        ctx.save_for_backward(q, k, v, o, lse2, cu_seqlens)
        ctx.scale, ctx.recipe = scale, recipe
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse2, cu_seqlens = ctx.saved_tensors
        dq, dk, dv = _backward(q, k, v, o, lse2, do, cu_seqlens, ctx.scale, ctx.recipe)
        grads = (g.to(t.dtype).contiguous() for g, t in zip((dq, dk, dv), (q, k, v)))
        return (*grads, None, None, None)


def reference_attention(q, k, v, cu_seqlens, *, recipe="bf16", softmax_scale=None):
    """Packed-document attention of ``recipe`` in pure PyTorch; differentiable.

    q [T, Hq, D], k/v [T, Hkv, D] (any float dtype; bf16 in the public API), cu_seqlens int32
    [S + 1]. Returns [T, Hq, D] in q's dtype. Inputs are not validated here (see
    ``flamia.attention``).
    """
    rec = get_recipe(recipe)
    scale = softmax_scale if softmax_scale is not None else q.shape[-1] ** -0.5
    return _ReferenceAttention.apply(q, k, v, cu_seqlens, scale, rec)


def exact_attention(q, k, v, cu_seqlens, *, softmax_scale=None):
    """Exact (unquantized) attention in float64, differentiable: the accuracy yardstick."""
    scale = softmax_scale if softmax_scale is not None else q.shape[-1] ** -0.5
    return _ReferenceAttention.apply(
        q.to(torch.float64), k.to(torch.float64), v.to(torch.float64), cu_seqlens, scale, None
    )


def attention_forward_backward(fn, q, k, v, do, cu_seqlens, **kwargs):
    """Run ``fn`` forward and backward with upstream gradient ``do``; returns (o, dq, dk, dv)."""
    q, k, v = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
    o = fn(q, k, v, cu_seqlens, **kwargs)
    o.backward(do.to(o.dtype))
    return o.detach(), q.grad, k.grad, v.grad
