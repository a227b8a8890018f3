"""Triton attention as ``torch.library`` custom ops, with autograd and fake (meta) kernels.

    flamia::attention_fwd(q, k, v, seg_start, seg_end, order_fwd, order_dkdv, order_dq,
                          softmax_scale, recipe, short_docs) -> (o, lse2)
    flamia::attention_bwd(do, q, k, v, o, lse2, seg_start, seg_end, order_dkdv, order_dq,
                          softmax_scale, recipe) -> (dq, dk, dv)                      (bf16)
    flamia::attention_fwd_fp8 / attention_bwd_fp8: the same for mxfp8, nvfp4_fp8 and
        fp8_rowwise, with the fused quantizers inside; the forward also returns the quantized
        tensors it saves (data and scales of Q, K, V, K's and V's scales packed as [Hkv, T, 2]
        rows: about 0.64x the bytes the bf16 op saves, see bench/activation_memory.py)
    flamia::batch_plan(cu_seqlens, total, head_dim, fp8, dq_fused, doc_tiles, order, short_docs):
        the per-batch scheduling tensors (the FP8 kernels use other tile shapes than the BF16
        ones, so their launch orders differ; dq_fused: the dK/dV order of FLAMIA_DQ=fused,
        _ordered_longest_first; doc_tiles: orders of tiles that start at document starts,
        FLAMIA_TILES=doc, see kernels.attention.doc_tiles; order: FLAMIA_ORDER, see
        kernels.attention.launch_order; short_docs: the forward's short-document tiles, see
        kernels.attention.fwd_short_docs)

Eager calls (not under torch.compile) run the same forward and backward functions through a
plain torch.autograd.Function (_EagerAttention), without torch.library's dispatch: host time
per BF16 fwd+bwd 1.79 -> 1.03-1.22 ms on the H200 together with cached device queries
(bench/results/host_layers_20261204_H200.txt).

The batch plan (per-token segment start/end and the tiles' launch orders) is derived from
cu_seqlens on the device, without a host sync, once per batch: a model passes the same
cu_seqlens tensor to every layer, so the plan is cached per tensor object and version.

Launch order: tiles sorted by their work (number of partner tiles), longest first, so that
the long documents' tiles start first and the short ones fill the tail (LPT scheduling); by
default one document's tiles launch next to each other, so that the operand tiles they share
are read from L2 rather than DRAM (FLAMIA_ORDER, kernels.attention.launch_order).
"""

from __future__ import annotations

import warnings

import torch

from ._tensor_cache import TensorCache
from .kernels import attention as K
from .kernels.quantize import INREG_ROW_SCALES, quantize_qkv, token_major_copies

__all__ = ["TRITON_RECIPES", "triton_attention", "BatchPlan", "batch_plan"]

TRITON_RECIPES: tuple[str, ...] = ("bf16", "mxfp8", "nvfp4_fp8", "fp8_rowwise")
FP8_RECIPES = ("mxfp8", "nvfp4_fp8", "fp8_rowwise")
# Q and K are per-token MXFP8 (mxfp8) or NVFP4 (nvfp4_fp8); V and dO are per-token MXFP8 in both.
# nvfp4_fp8's Q/K data are E2M1 x UE4M3 values held exactly in bf16: Hopper has no FP4 MMA, so
# QK^T, dQ = dS K and dK = dS^T Q run as bf16 MMAs on those values (emulated NVFP4); PV, dP, dV
# use FP8 units. fp8_rowwise is mxfp8 with fp32 per-token scales amax / 448 (not E8M0): the same
# kernels, which take per-token scales as fp32 factors, on another quantizer's output.


def _fp8_scales(recipe: str) -> dict:
    """The quantizer settings of an FP8 recipe; fp8_rowwise refused where its scales cannot go."""
    fp32_scale = recipe == "fp8_rowwise"
    if fp32_scale and K.FP8_MMA_MODES[K.fp8_mma_mode()] == "mx":
        raise ValueError("fp8_rowwise's fp32 per-token scales are not E8M0 block scales, so the "
                         "block-scaled MMA (FLAMIA_FP8_MMA=mx, the default from compute "
                         "capability 10) cannot take them; set FLAMIA_FP8_MMA=fast or precise")
    if not INREG_ROW_SCALES:
        warnings.warn("FLAMIA_UNSAFE_NO_INREG_SCALES=1: the FP8 kernels cast P' and dS' without "
                      "their row scales, so every FP8 result is WRONG; a timing experiment only "
                      "(flamia/kernels/quantize.py)", RuntimeWarning, stacklevel=2)
    return {"qk_nvfp4": recipe == "nvfp4_fp8", "fp32_scale": fp32_scale}


class BatchPlan:
    """Per-batch scheduling tensors, all int32 on the inputs' device."""

    def __init__(self, seg_start, seg_end, order_fwd, order_dkdv, order_dq, short_docs=False):
        self.seg_start, self.seg_end = seg_start, seg_end
        self.order_fwd, self.order_dkdv, self.order_dq = order_fwd, order_dkdv, order_dq
        # The forward's tiles (kernels.attention.fwd_short_docs): order_fwd is built for them,
        # so the forward must be launched with the same flag.
        self.short_docs = short_docs


def _query_tile_range(seg_start, total, block_m, block_n):
    """[lo, hi): the key tiles each query tile visits (forward, dQ)."""
    starts = torch.arange(0, total, block_m, device=seg_start.device)
    lo = seg_start[starts] // block_n
    hi = (torch.clamp(starts + block_m, max=total) + block_n - 1) // block_n
    return lo, hi


def _key_tile_ranges(seg_end, total, block_m, block_n):
    """[lo, hi): the query tiles each key tile visits (as in the dK/dV kernel)."""
    starts = torch.arange(0, total, block_n, device=seg_end.device)
    last = torch.clamp(starts + block_n, max=total) - 1
    return starts // block_m, (seg_end[last] + block_m - 1) // block_m


def _longest_first(work):
    return torch.argsort(work, descending=True, stable=True).to(torch.int32)


def _grouped_longest_first(work, group, n_groups, max_work):
    """FLAMIA_ORDER=grouped (kernels.attention.launch_order): the tiles of each group (group ids
    in [0, n_groups)) next to each other, longest first inside a group, the groups ordered by
    their longest tile, longest first (ties: lower group id first). work in [-1, max_work] (-1:
    doc tiles' empty slots). One stable sort on a key that packs the three criteria (one radix
    sort instead of three: the plan's sorts are most of its GPU time)."""
    span = max_work + 2
    assert span * n_groups * span < 2**62, "the packed sort key would overflow int64"
    w = work.to(torch.int64) + 1
    longest = w.new_zeros(n_groups).scatter_reduce_(0, group, w, "amax")
    key = (longest[group] * n_groups + (n_groups - 1 - group)) * span + w
    return torch.argsort(key, descending=True, stable=True).to(torch.int32)


def _ordered(work, group, n_groups, max_work, mode):
    """The launch order of tiles with this work in FLAMIA_ORDER mode ``mode``."""
    if mode == "longest":
        return _longest_first(work)
    return _grouped_longest_first(work, group, n_groups, max_work)


def _ordered_longest_first(lo, hi):
    """Longest first for the dK/dV kernel that adds dQ in key-tile order (FLAMIA_DQ=fused): a key
    tile waits for the earlier key tiles that share a query tile with it, so these must launch
    first, or a waiting program could hold an SM that the tile it waits for needs. Key tiles that
    share query tiles form runs of consecutive tiles (chains: tile n and n + 1 share one iff
    hi[n] > lo[n + 1]); each tile is ranked by the largest work at or after it in its chain, which
    keeps every chain in increasing order (stable sort) and is longest first otherwise."""
    work = hi - lo
    chain = torch.zeros_like(work)
    chain[1:] = torch.cumsum((hi[:-1] <= lo[1:]).to(work.dtype), 0)
    # Suffix maximum within each chain: one cummax over the reversed tiles, with each chain
    # lifted above all chains after it so that the maximum never crosses into an earlier chain.
    lift = (chain[-1] + 1 - chain) * (work.max() + 1)
    rank = torch.cummax((lift + work).flip(0), 0).values.flip(0) - lift
    return _longest_first(rank)


def _doc_tiles(cu, total, block):
    """Doc tiles (kernels.attention.doc_tiles) of ``block`` rows: each document's tiles start at
    its start plus multiples of block. Returns (first row, document start, document end,
    document index), one per slot of a fixed count, cdiv(total, block) + documents (no host
    sync: the count of tiles is at most that); slots past the last tile have first row -1."""
    n_docs = cu.numel() - 1
    counts = (cu[1:] - cu[:-1] + block - 1) // block
    ends = torch.cumsum(counts, 0)
    slot = torch.arange(-(-total // block) + n_docs, device=cu.device)
    doc = torch.searchsorted(ends, slot, right=True).clamp(max=n_docs - 1)
    first = cu[doc] + (slot - (ends[doc] - counts[doc])) * block
    return torch.where(slot < ends[-1], first, -1), cu[doc], cu[doc + 1], doc


def _ordered_rows(first, doc, work, n_docs, max_work, mode):
    """The doc tiles' first rows in launch order (grouped by document), the empty slots (-1)
    last (their own group, past every document's)."""
    work = torch.where(first >= 0, work, -1)
    group = torch.where(first >= 0, doc, n_docs)
    return first[_ordered(work, group, n_docs + 1, max_work, mode)].to(torch.int32)


def _doc_query_tiles(cu, total, block_m, block_n, mode):
    """Launch order of the doc query tiles (forward, dQ): work = key tiles visited."""
    first, start, end, doc = _doc_tiles(cu, total, block_m)
    rows_end = torch.minimum(first + block_m, end)
    work = (rows_end - start + block_n - 1) // block_n
    return _ordered_rows(first, doc, work, cu.numel() - 1, -(-total // block_n), mode)


def _doc_key_tiles(cu, total, block_m, block_n, mode):
    """Launch order of the doc key tiles (dK/dV): work = query tiles visited."""
    first, start, end, doc = _doc_tiles(cu, total, block_n)
    work = (end - start + block_m - 1) // block_m - (first - start) // block_m
    return _ordered_rows(first, doc, work, cu.numel() - 1, -(-total // block_m), mode)


@torch.library.custom_op("flamia::batch_plan", mutates_args=())
def _batch_plan_op(
    cu_seqlens: torch.Tensor, total: int, head_dim: int, fp8: bool, dq_fused: bool,
    doc_tiles: bool = False, order: str = "grouped", short_docs: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """An opaque op, so that torch.compile treats the plan as one call (inductor need not lower
    searchsorted / stable argsort). doc_tiles: orders of doc tiles' first rows
    (kernels.attention.doc_tiles) instead of grid tiles' indices; order: the launch order's
    mode (kernels.attention.launch_order)."""
    cu = cu_seqlens.to(torch.int64)
    tokens = torch.arange(total, device=cu.device)
    seg = torch.searchsorted(cu[1:], tokens, right=True)
    seg_start = cu[seg]
    seg_end = cu[seg + 1]
    fm, fn = K.fwd_blocks(head_dim, fp8, short_docs)
    bm, bn = K.bwd_blocks(head_dim, fp8)
    qm, qn = K.dq_blocks(head_dim, fp8)
    if doc_tiles:
        def query_tiles(block_m, block_n):
            return _doc_query_tiles(cu, total, block_m, block_n, order)

        dkdv = _doc_key_tiles(cu, total, bm, bn, order)
    else:
        # Groups: query tiles by the first key tile they read, key tiles by the last query
        # tile they read (one document's tiles share them).
        def query_tiles(block_m, block_n):
            lo, hi = _query_tile_range(seg_start, total, block_m, block_n)
            n_key_tiles = -(-total // block_n)
            return _ordered(hi - lo, lo, n_key_tiles, n_key_tiles, order)

        lo, hi = _key_tile_ranges(seg_end, total, bm, bn)
        n_query_tiles = -(-total // bm)
        dkdv = (_ordered_longest_first(lo, hi) if dq_fused
                else _ordered(hi - lo, hi - 1, n_query_tiles, n_query_tiles, order))
    order_fwd = query_tiles(fm, fn)
    # Where the forward's and the dQ kernel's tiles are the same (the FP8 kernels, the triton
    # BF16 ones), one order serves both (a copy: a custom op's outputs must not alias).
    orders = (order_fwd, dkdv,
              order_fwd.clone() if (qm, qn) == (fm, fn) else query_tiles(qm, qn))
    return (seg_start.to(torch.int32), seg_end.to(torch.int32), *orders)


@_batch_plan_op.register_fake
def _(cu_seqlens, total, head_dim, fp8, dq_fused, doc_tiles=False, order="grouped",
      short_docs=False):
    # Doc tiles: one slot more per document (_doc_tiles).
    n_tiles = lambda block: -(-total // block) + (cu_seqlens.shape[0] - 1 if doc_tiles else 0)
    i32 = lambda n: cu_seqlens.new_empty((n,), dtype=torch.int32)
    return (i32(total), i32(total), i32(n_tiles(K.fwd_blocks(head_dim, fp8, short_docs)[0])),
            i32(n_tiles(K.bwd_blocks(head_dim, fp8)[1])),
            i32(n_tiles(K.dq_blocks(head_dim, fp8)[0])))


def batch_plan(cu_seqlens: torch.Tensor, total: int, head_dim: int, fp8: bool = False,
               short_docs: bool = False) -> BatchPlan:
    """The plan for the BF16 kernels, or for the FP8 kernels (fp8=True); short_docs: for the
    forward's short-document tiles (kernels.attention.fwd_short_docs)."""
    return BatchPlan(*_batch_plan_op(cu_seqlens, total, head_dim, fp8, K.dq_fused(fp8),
                                     K.doc_tiles(fp8), K.launch_order(), short_docs),
                     short_docs=short_docs)


_plans = TensorCache()


def cached_batch_plan(cu_seqlens: torch.Tensor, total: int, head_dim: int,
                      fp8: bool = False, short_docs: bool = False) -> BatchPlan:
    """``batch_plan``, once per cu_seqlens tensor (see flamia._tensor_cache)."""
    if torch.compiler.is_compiling():
        return batch_plan(cu_seqlens, total, head_dim, fp8, short_docs)
    key = (total, head_dim, fp8, K.plan_blocks(head_dim, fp8, short_docs), K.dq_fused(fp8),
           K.doc_tiles(fp8), K.launch_order(), short_docs)
    plan = _plans.get(cu_seqlens, key)
    if plan is None:
        plan = _plans.put(cu_seqlens, key,
                          batch_plan(cu_seqlens, total, head_dim, fp8, short_docs))
    return plan


# ------------------------------------------------------------------------------------------
# Custom ops
# ------------------------------------------------------------------------------------------


def _check_recipe(recipe: str, accepted=TRITON_RECIPES):
    if recipe not in accepted:
        raise ValueError(f"no Triton kernel for recipe {recipe!r} here; accepted: {accepted}")


# The ops' bodies are plain functions: the custom ops below wrap them for torch.compile and
# opcheck, and eager calls run them through _EagerAttention (see triton_attention).


def _fwd_bf16(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, seg_start: torch.Tensor,
    seg_end: torch.Tensor, order_fwd: torch.Tensor, order_dkdv: torch.Tensor,
    order_dq: torch.Tensor, softmax_scale: float, recipe: str, short_docs: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(o, lse2). The backward's plan tensors are inputs too, so that the autograd formula
    registered below receives them. short_docs: the plan's (BatchPlan.short_docs)."""
    _check_recipe(recipe, ("bf16",))
    return K.attention_fwd(q, k, v, seg_start, order_fwd, softmax_scale, seg_end=seg_end,
                           short_docs=short_docs)


def _bwd_bf16(
    do: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor,
    lse: torch.Tensor, seg_start: torch.Tensor, seg_end: torch.Tensor,
    order_dkdv: torch.Tensor, order_dq: torch.Tensor, softmax_scale: float, recipe: str,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    _check_recipe(recipe, ("bf16",))
    return K.attention_bwd(do, q, k, v, o, lse, seg_start, seg_end, order_dkdv, order_dq,
                           softmax_scale)


attention_fwd = torch.library.custom_op("flamia::attention_fwd", mutates_args=())(_fwd_bf16)
attention_bwd = torch.library.custom_op("flamia::attention_bwd", mutates_args=())(_bwd_bf16)


@attention_fwd.register_fake
def _(q, k, v, seg_start, seg_end, order_fwd, order_dkdv, order_dq, softmax_scale, recipe,
      short_docs=False):
    return torch.empty_like(q), q.new_empty((q.shape[1], q.shape[0]), dtype=torch.float32)


@attention_bwd.register_fake
def _(do, q, k, v, o, lse, seg_start, seg_end, order_dkdv, order_dq, softmax_scale, recipe):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def _save(ctx, saved, softmax_scale, recipe):
    """What a backward needs. No zero gradients for the outputs without one (lse, the FP8
    forward's quantized tensors) before every backward: set_materialize_grads(False) (a fill
    kernel per output and call otherwise, 0.1 ms at 4 x 8k tokens, 16 heads)."""
    ctx.set_materialize_grads(False)
    ctx.save_for_backward(*saved)
    ctx.softmax_scale, ctx.recipe = softmax_scale, recipe


def _gradients(ctx, do, bwd, o_index):
    """(dq, dk, dv) and None for the other inputs (ctx.n_inputs in all): bwd(dO, *saved,
    scale, recipe); dO None when O did not reach the loss (grads are not materialized, see
    _save)."""
    saved = ctx.saved_tensors
    if do is None:
        do = torch.zeros_like(saved[o_index])
    dq, dk, dv = bwd(do.contiguous(), *saved, ctx.softmax_scale, ctx.recipe)
    return (dq, dk, dv) + (None, ) * (ctx.n_inputs - 3)


def _setup_context(ctx, inputs, output):
    q, k, v, seg_start, seg_end, _, order_dkdv, order_dq, softmax_scale, recipe = inputs[:10]
    ctx.n_inputs = len(inputs)
    o, lse = output
    ctx.mark_non_differentiable(lse)
    _save(ctx, (q, k, v, o, lse, seg_start, seg_end, order_dkdv, order_dq), softmax_scale, recipe)


def _backward(ctx, do, _dlse):
    return _gradients(ctx, do, attention_bwd, 3)


attention_fwd.register_autograd(_backward, setup_context=_setup_context)


# ------------------------------------------------------------------------------------------
# FP8 (mxfp8, nvfp4_fp8, fp8_rowwise): fused quantization of Q, K, V in the forward and of dO
# in the backward.
# The forward saves the quantized tensors (E4M3 / NVFP4 data and per-token scales) for the
# backward instead of the bf16 inputs. The token-major copies the backward's MMAs read (Q, K,
# dO) are made in the backward, so they are never held between forward and backward; V's copy
# is the forward's own (P V) and is not saved.
# ------------------------------------------------------------------------------------------


def _fwd_fp8(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, seg_start: torch.Tensor,
    seg_end: torch.Tensor, order_fwd: torch.Tensor, order_dkdv: torch.Tensor,
    order_dq: torch.Tensor, softmax_scale: float, recipe: str, short_docs: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
           torch.Tensor]:
    """(o, lse2, q8, sq, k8, v8, skv): the output and what the backward reads; skv [Hkv, T, 2]
    holds K's and V's per-token scales (written by quantize_qkv). short_docs: the BF16
    forward's tile choice (always False for the FP8 recipes, whose key tiles are the recipe's
    P' groups); an argument here so that both forward ops take the same arguments."""
    _check_recipe(recipe, FP8_RECIPES)
    if short_docs:
        raise ValueError("short_docs=True selects the BF16 forward's short-document tiles; the FP8 "
                         "recipes' key tiles are the recipe's P' groups: pass False")
    # One launch for the three quantizers (the host's launch time shows on short documents).
    q8, sq, k8, v8, vt8, skv = quantize_qkv(q, k, v, **_fp8_scales(recipe))
    o, lse = K.attention_fwd(q8, k8, None, seg_start, order_fwd, softmax_scale,
                             fp8={"sq": sq, "skv": skv, "vt": vt8,
                                  "qk_bf16": recipe == "nvfp4_fp8"})
    return o, lse, q8, sq, k8, v8, skv


def _bwd_fp8(
    do: torch.Tensor, o: torch.Tensor, lse: torch.Tensor, q8: torch.Tensor, sq: torch.Tensor,
    k8: torch.Tensor, v8: torch.Tensor, skv: torch.Tensor, seg_start: torch.Tensor,
    seg_end: torch.Tensor, order_dkdv: torch.Tensor, order_dq: torch.Tensor,
    softmax_scale: float, recipe: str,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    _check_recipe(recipe, FP8_RECIPES)
    qt8, kt8 = token_major_copies(q8, k8)  # one launch for both
    # dO is quantized by the backward itself, in one kernel with delta (K.attention_bwd)
    fp8 = {"qt": qt8, "kt": kt8, "sq": sq, "skv": skv, "qk_bf16": recipe == "nvfp4_fp8",
           "fp32_scale": _fp8_scales(recipe)["fp32_scale"]}
    return K.attention_bwd(do, q8, k8, v8, o, lse, seg_start, seg_end, order_dkdv, order_dq,
                           softmax_scale, fp8=fp8)


attention_fwd_fp8 = torch.library.custom_op("flamia::attention_fwd_fp8", mutates_args=())(
    _fwd_fp8)
attention_bwd_fp8 = torch.library.custom_op("flamia::attention_bwd_fp8", mutates_args=())(
    _bwd_fp8)


@attention_fwd_fp8.register_fake
def _(q, k, v, seg_start, seg_end, order_fwd, order_dkdv, order_dq, softmax_scale, recipe,
      short_docs=False):
    from .kernels.quantize import FP8_STORAGE

    total, hq, d = q.shape
    hkv = k.shape[1]
    f8 = lambda *shape: q.new_empty(shape, dtype=FP8_STORAGE)
    qk = f8 if recipe != "nvfp4_fp8" else (lambda *shape: q.new_empty(shape, dtype=torch.bfloat16))
    f32 = lambda *shape: q.new_empty(shape, dtype=torch.float32)
    return (q.new_empty(q.shape, dtype=torch.bfloat16), f32(hq, total),
            qk(total, hq, d), f32(hq, total), qk(total, hkv, d), f8(total, hkv, d),
            f32(hkv, total, K.KROW))


@attention_bwd_fp8.register_fake
def _(do, o, lse, q8, sq, k8, v8, skv, seg_start, seg_end, order_dkdv, order_dq,
      softmax_scale, recipe):
    bf16 = lambda t: t.new_empty(t.shape, dtype=torch.bfloat16)
    return bf16(q8), bf16(k8), bf16(v8)


def _setup_context_fp8(ctx, inputs, output):
    _, _, _, seg_start, seg_end, _, order_dkdv, order_dq, softmax_scale, recipe = inputs[:10]
    ctx.n_inputs = len(inputs)
    o, lse, q8, sq, k8, v8, skv = output
    ctx.mark_non_differentiable(lse, q8, sq, k8, v8, skv)
    _save(ctx, (o, lse, q8, sq, k8, v8, skv, seg_start, seg_end, order_dkdv, order_dq),
          softmax_scale, recipe)


def _backward_fp8(ctx, do, *_unused_grads):
    return _gradients(ctx, do, attention_bwd_fp8, 0)


attention_fwd_fp8.register_autograd(_backward_fp8, setup_context=_setup_context_fp8)


class _EagerAttention(torch.autograd.Function):
    """The custom ops' forward and backward without torch.library's dispatch, for eager calls:
    the same functions on the same tensors (same kernels, same saved tensors), with less host
    time per call (custom-op dispatch: about 0.1 ms per forward and per backward on the H200,
    bench/results/host_layers_20261204_H200.txt), which short documents do not hide behind the
    kernels. Under torch.compile, triton_attention calls the custom ops."""

    @staticmethod
    def forward(ctx, q, k, v, seg_start, seg_end, order_fwd, order_dkdv, order_dq,
                softmax_scale, recipe, short_docs):
        args = (q, k, v, seg_start, seg_end, order_fwd, order_dkdv, order_dq, softmax_scale,
                recipe, short_docs)
        ctx.fp8 = recipe in FP8_RECIPES
        ctx.n_inputs = len(args)
        if ctx.fp8:
            o, *saved = _fwd_fp8(*args)
            saved = (o, *saved, seg_start, seg_end, order_dkdv, order_dq)
        else:
            o, lse = _fwd_bf16(*args)
            saved = (q, k, v, o, lse, seg_start, seg_end, order_dkdv, order_dq)
        _save(ctx, saved, softmax_scale, recipe)
        return o

    @staticmethod
    def backward(ctx, do):
        return _gradients(ctx, do, *((_bwd_fp8, 0) if ctx.fp8 else (_bwd_bf16, 3)))


def triton_attention(q, k, v, cu_seqlens, max_seqlen, recipe, softmax_scale):
    """Differentiable Triton attention; inputs already validated by ``flamia.attention``."""
    _check_recipe(recipe)
    total, _, d = q.shape
    scale = float(softmax_scale) if softmax_scale is not None else d**-0.5
    fp8 = recipe in FP8_RECIPES
    # max_seqlen (a host int, as in FlashAttention's varlen API) picks the forward's tiles
    short_docs = K.fwd_short_docs(max_seqlen, d, fp8)
    plan = cached_batch_plan(cu_seqlens, total, d, fp8, short_docs)
    args = (q, k, v, plan.seg_start, plan.seg_end, plan.order_fwd, plan.order_dkdv,
            plan.order_dq, scale, recipe, plan.short_docs)
    if not torch.compiler.is_compiling():
        return _EagerAttention.apply(*args)
    if fp8:
        return attention_fwd_fp8(*args)[0]
    return attention_fwd(*args)[0]
