"""The public entry point ``flamia.attention``: input validation and dispatch to an implementation.

Implementations:
    "reference"  pure PyTorch (``flamia.reference``), every recipe, any device; O(T^2) memory
    "triton"     Triton kernels (``flamia.ops``): bf16, mxfp8, nvfp4_fp8; on CUDA,
                 or on CPU through the Triton interpreter when TRITON_INTERPRET=1 was set before
                 triton was imported
    "auto"       "triton" on CUDA when the recipe has a kernel, else "reference"
"""

from __future__ import annotations

import os

import torch

from ._tensor_cache import TensorCache
from .recipes import get_recipe
from .reference import reference_attention

__all__ = ["attention", "SUPPORTED_HEAD_DIMS", "IMPLS", "validate_attention_inputs"]

SUPPORTED_HEAD_DIMS = (64, 128)
IMPLS = ("auto", "triton", "reference")

# Value checks of cu_seqlens need its contents on the host (a device sync). A model passes the
# same cu_seqlens tensor to every layer of a step, so the verdict is cached per tensor.
_validated = TensorCache()


def _check_cu_seqlens_values(cu_seqlens: torch.Tensor, total: int, max_seqlen: int) -> None:
    if _validated.get(cu_seqlens, (total, max_seqlen)):
        return
    vals = cu_seqlens.tolist()
    if vals[0] != 0:
        raise ValueError(f"cu_seqlens must start at 0, got {vals[0]}")
    if vals[-1] != total:
        raise ValueError(
            f"cu_seqlens must end at the number of tokens T={total} (q.shape[0]), got {vals[-1]}"
        )
    lengths = [b - a for a, b in zip(vals[:-1], vals[1:])]
    bad = [i for i, n in enumerate(lengths) if n <= 0]
    if bad:
        raise ValueError(
            f"cu_seqlens must be strictly increasing (no empty segments); segment {bad[0]} has "
            f"length {lengths[bad[0]]} (cu_seqlens[{bad[0]}:{bad[0] + 2}] = "
            f"{vals[bad[0]:bad[0] + 2]})"
        )
    if max(lengths) > max_seqlen:
        raise ValueError(
            f"max_seqlen={max_seqlen} is smaller than the longest segment ({max(lengths)} tokens)"
        )
    _validated.put(cu_seqlens, (total, max_seqlen), True)


def validate_attention_inputs(q, k, v, cu_seqlens, max_seqlen, softmax_scale=None) -> None:
    """Raise TypeError / ValueError with an actionable message for any malformed input."""
    for name, t in (("q", q), ("k", k), ("v", v), ("cu_seqlens", cu_seqlens)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dtype != torch.bfloat16:
            raise TypeError(f"{name} must be bfloat16 (the accepted input dtype), got {t.dtype}")
        if t.dim() != 3:
            raise ValueError(
                f"{name} must have rank 3, [T, H, D] (packed varlen layout), got shape "
                f"{tuple(t.shape)}"
            )
        if t.device != q.device:
            raise ValueError(f"{name} is on {t.device} but q is on {q.device}")
    total, hq, d = q.shape
    if k.shape != v.shape:
        raise ValueError(f"k and v must have the same shape, got {tuple(k.shape)} and {tuple(v.shape)}")
    if k.shape[0] != total or k.shape[2] != d:
        raise ValueError(
            f"k/v must be [T, Hkv, D] with T={total} and D={d} as in q, got {tuple(k.shape)}"
        )
    hkv = k.shape[1]
    if hkv == 0 or hq % hkv:
        raise ValueError(f"Hq={hq} must be a positive multiple of Hkv={hkv} (GQA)")
    if d not in SUPPORTED_HEAD_DIMS:
        raise ValueError(f"head dim D={d} is not supported; accepted: {SUPPORTED_HEAD_DIMS}")
    if total == 0:
        raise ValueError("q has no tokens (T=0)")
    if cu_seqlens.dtype != torch.int32:
        raise TypeError(f"cu_seqlens must be int32, got {cu_seqlens.dtype}")
    if cu_seqlens.dim() != 1 or cu_seqlens.numel() < 2:
        raise ValueError(
            f"cu_seqlens must be 1-D with at least 2 entries (0 and T), got shape "
            f"{tuple(cu_seqlens.shape)}"
        )
    if cu_seqlens.device != q.device:
        raise ValueError(f"cu_seqlens must be on q's device {q.device}, got {cu_seqlens.device}")
    if not isinstance(max_seqlen, int) or isinstance(max_seqlen, bool) or max_seqlen <= 0:
        raise TypeError(f"max_seqlen must be a positive int, got {max_seqlen!r}")
    if softmax_scale is not None and not (isinstance(softmax_scale, float) and softmax_scale > 0):
        raise ValueError(f"softmax_scale must be a positive float or None, got {softmax_scale!r}")
    if not torch.compiler.is_compiling():
        _check_cu_seqlens_values(cu_seqlens, total, max_seqlen)


def _triton_available(device: torch.device) -> bool:
    if device.type == "cuda":
        return True
    return device.type == "cpu" and os.environ.get("TRITON_INTERPRET") == "1"


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens: torch.Tensor,
    max_seqlen: int,
    *,
    recipe: str = "mxfp8",
    softmax_scale: float | None = None,
    impl: str = "auto",
) -> torch.Tensor:
    """Document-causal attention over packed documents (varlen layout).

    Args:
        q: [T, Hq, D] bfloat16, after RoPE. k, v: [T, Hkv, D] bfloat16; Hq % Hkv == 0.
            D in (64, 128).
        cu_seqlens: int32 [S + 1] on q's device: 0, end of segment 0, ..., T (strictly
            increasing). Query i attends key j iff both lie in one segment and j <= i.
        max_seqlen: the longest segment's length (an upper bound is accepted). A host int, as
            in FlashAttention's varlen API, so no device sync is needed: on Hopper the BF16
            forward takes its short-document tiles when it is at most 1024
            (kernels.attention.fwd_short_docs). It changes speed and rounding only (O within
            ~1e-5 relative of the other tiles'); what is attended never depends on it.
        recipe: one of ``flamia.RECIPES`` ("bf16", "mxfp8", "nvfp4_fp8", "fp8_rowwise":
            mxfp8 with fp32 per-token scales instead of E8M0 ones; the leaky controls
            "mxfp8_seqblock" and "fp8_tensorwise" exist for the probes, never train with them).
        softmax_scale: defaults to D ** -0.5.
        impl: "auto", "triton" or "reference".

    Returns:
        [T, Hq, D] bfloat16; differentiable with respect to q, k, v.
    """
    rec = get_recipe(recipe)
    if impl not in IMPLS:
        raise ValueError(f"unknown impl {impl!r}; accepted: {', '.join(IMPLS)}")
    validate_attention_inputs(q, k, v, cu_seqlens, max_seqlen, softmax_scale)
    if impl == "auto":
        from .ops import TRITON_RECIPES

        use_triton = q.device.type == "cuda" and rec.name in TRITON_RECIPES
        impl = "triton" if use_triton else "reference"
    if impl == "reference":
        return reference_attention(q, k, v, cu_seqlens, recipe=rec, softmax_scale=softmax_scale)
    from .ops import TRITON_RECIPES, triton_attention

    if rec.name not in TRITON_RECIPES:
        raise ValueError(
            f"recipe {rec.name!r} has no Triton kernel yet; Triton recipes: "
            f"{', '.join(TRITON_RECIPES) or 'none'}; use impl='reference'"
        )
    if not _triton_available(q.device):
        raise ValueError(
            f"impl='triton' needs a CUDA device, or TRITON_INTERPRET=1 set before importing "
            f"triton for CPU tensors; q is on {q.device}"
        )
    return triton_attention(q, k, v, cu_seqlens, max_seqlen, rec.name, softmax_scale)
