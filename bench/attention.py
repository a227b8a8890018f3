"""Packed-document attention benchmark on the H200 (DESIGN.md section 7).

    PYTHONPATH=$PWD python -m bench.attention [--quick] [--out bench/results] [--providers ...]

For each workload (packed rows of L tokens, documents drawn from a length distribution, cut at
row ends), every provider gets the same q, k, v, dO (each in its own layout, converted outside the
timed region), is checked against a float32 per-segment reference (O, dQ, dK, dV relative L2 error)
before it is timed, then timed with triton.testing.do_bench medians: forward, forward+backward,
and backward = (fwd+bwd) - fwd. All providers of a workload are timed in --rounds rounds (4), in
alternating order (round_orders: a heating GPU slows whoever is timed later); a provider's time is
the mean of its round medians. Python's garbage collector is off while timing (--keep-gc: on).
"host ms": one fwd+bwd call's host time from an idle GPU (host_ms); near the timed fwd+bwd, the
row measured the host. FLOPs: 4 * Hq * D * sum_l l(l+1)/2 forward, 2.5x that backward.
Per-batch preparation (FLAMIA's batch plan, FlexAttention's block mask) is built once per batch
and reused by every layer in training, so it is outside the timed call for both; its cost is
reported separately.

Providers:
    flamia-bf16  flamia.attention(recipe="bf16", impl="triton")
    flamia-bf16 (fused dQ)  the same with FLAMIA_DQ=fused: dQ accumulated by the dK/dV kernel in
                 a fixed order (no dQ kernel; see flamia.kernels.attention.dq_fused)
    flamia-bf16 (triton kernels)  the same with FLAMIA_{FWD,DQ,DKDV}_KERNEL=triton: the triton
                 forward, dQ and dK/dV kernels instead of the Gluon ones that Hopper GPUs run by
                 default (flamia/kernels/attention_hopper.py)
    flamia-bf16 (dK/dV lse by loads)  the same with FLAMIA_GLUON_DKDV_LSE=load: the Gluon dK/dV
                 kernel's lse2 and delta by global loads instead of its producer's TMA (the
                 default since 2026-12-05); named with --providers only
    flamia-bf16 (persistent fwd)  the same with FLAMIA_GLUON_FWD=128,128,8,2,persistent: the
                 persistent Gluon forward with 128-wide key tiles (the default forward since
                 2026-12-06 except on short documents, which take 64-wide ones); named with
                 --providers only
    flamia-bf16 (ws fwd)  the same with FLAMIA_GLUON_FWD=128,128,8,2,ws: the warp-specialized
                 forward, the default before 2026-12-06; named with --providers only
    flamia-bf16 (persistent fwd, dQ)  the same and FLAMIA_GLUON_DQ=persistent: the persistent
                 Gluon dQ kernel too (both the defaults since 2026-12-06, eleventh session: the
                 same code as flamia-bf16 now); named with --providers only
    flamia-bf16 (ws dQ)  the same with FLAMIA_GLUON_DQ=ws: the warp-specialized dQ kernel, the
                 default before 2026-12-06 (eleventh session); named with --providers only
    flamia-bf16 (persistent dK/dV)  the same with FLAMIA_GLUON_DKDV=2,0,persistent: the
                 persistent dK/dV kernel (the default on grid tiles since 2026-12-06, eleventh
                 session: the same code as flamia-bf16 now); named with --providers only
    flamia-bf16 (ws dK/dV)  the same with FLAMIA_GLUON_DKDV=2,0,ws: the warp-specialized dK/dV
                 kernel, the default before; named with --providers only
    flamia-bf16 (delta kernel)  the same with FLAMIA_DELTA=kernel: delta = rowsum(dO * O) by its
                 own kernel before dK/dV and dQ (before 2026-12-06, eleventh session; now the dQ
                 kernel computes it); named with --providers only
    flamia-bf16 (doc tiles)  the same with FLAMIA_TILES=doc: tiles start at each document's start
                 (flamia.kernels.attention.doc_tiles); named with --providers only
    flamia-bf16 (LPT order)  the same with FLAMIA_ORDER=longest: tiles launched by work alone
                 (the order before 2026-12-05 evening; flamia.kernels.attention.launch_order);
                 named with --providers only
    flamia-bf16 (A/A control)  flamia-bf16 again, timed as a provider of its own: how far apart
                 two timings of the same code come out; named with --providers only
    flamia-mxfp8 flamia.attention(recipe="mxfp8", impl="triton"), quantization included
    flamia-mxfp8 (Gluon dK/dV)  the same with FLAMIA_DKDV_KERNEL=gluon: the warp-specialized Gluon
                 FP8 dK/dV kernel (one kernel, S^T and P^T once), the default on Hopper since
                 2026-12-06 (fifteenth session), so there the same code as flamia-mxfp8; named
                 with --providers only
    flamia-mxfp8 (triton dK/dV)  the same with FLAMIA_DKDV_KERNEL=triton: the triton dV-only and
                 dK-only kernels (the default before the fifteenth session); named with
                 --providers only
    flamia-mxfp8 (LPT order)  the same with FLAMIA_ORDER=longest; named with --providers only
    flamia-mxfp8 (Gluon dK/dV pair steps)  the same with the Gluon FP8 dK/dV kernel in pair
                 steps (FLAMIA_DKDV_KERNEL=gluon, FLAMIA_GLUON_DKDV8=3,pair: two query tiles'
                 element-wise chains side by side per step); named with --providers only
    flamia-mxfp8 (Gluon dK/dV wait steps)  the same with the Gluon FP8 dK/dV kernel's
                 partitions each waiting for their MMAs over 2 ring slots (FLAMIA_GLUON_DKDV8=2,
                 the default before 2026-12-07; the default now: 3,pipe); named with
                 --providers only
    flamia-mxfp8 (persistent dK/dV)  the same with the persistent Gluon FP8 dK/dV kernel
                 (FLAMIA_GLUON_DKDV8=persistent: one program per SM taking key tiles from a
                 queue); named with --providers only
    flamia-fp8_rowwise  recipe="fp8_rowwise": mxfp8's kernels on fp32 per-token scales (not
                 E8M0); named with --providers only
    flamia-nvfp4_fp8 (emulated NVFP4): recipe="nvfp4_fp8"; Hopper has no FP4 MMA, so its QK^T,
                 dQ and dK run as bf16 MMAs on the exact NVFP4 values (PV, dP, dV on FP8 units)
    flamia-nvfp4_fp8 (emulated NVFP4, dK/dV wait steps)  the same with FLAMIA_GLUON_DKDV8=2, as
                 flamia-mxfp8 (Gluon dK/dV wait steps); named with --providers only
    flamia-nvfp4_fp8 (emulated NVFP4, persistent dK/dV)  the same with
                 FLAMIA_GLUON_DKDV8=persistent; named with --providers only
    flex         torch.compile(flex_attention) with a document-causal block mask
    varlen       torch.nn.attention.varlen.varlen_attn, window_size=(-1, 0) (causal)
    cudnn-dense  SDPA with SDPBackend.CUDNN_ATTENTION, is_causal=True: only valid, and only run,
                 on workloads of one document per row
    cudnn-thd    cuDNN's ragged (THD) SDPA forward/backward through nvidia-cudnn-frontend (wheel
                 from ../shared/device/wheels.sh; checked against the float32 reference like
                 every provider, on the H200 since 2026-12-03); a failure is reported in its
                 row, the other providers still run

Writes <out>/attention_<date>_<gpu>.json and .md with GPU, versions and date; prints the table.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import inspect
import json
import math
import os
import platform
import subprocess
import sys
import time
from unittest import mock

import torch

import flamia
from flamia.kernels.quantize import INREG_ROW_SCALES
from flamia.ops import batch_plan

DISTRIBUTIONS = ("one_doc", "equal_2k", "u32_1024", "u128_4096", "u1024_8192", "long_tail",
                 "lognormal_1k")


# ------------------------------------------------------------------------------------------
# Workloads
# ------------------------------------------------------------------------------------------


def _draw(kind: str, L: int, gen: torch.Generator) -> int:
    u = lambda a, b: int(torch.randint(a, b + 1, (1,), generator=gen))
    if kind == "one_doc":
        return L
    if kind == "equal_2k":
        return 2048
    if kind == "u32_1024":
        return u(32, 1024)
    if kind == "u128_4096":
        return u(128, 4096)
    if kind == "u1024_8192":
        return u(1024, 8192)
    if kind == "long_tail":  # 7/8 short documents, 1/8 as long as a row
        return L if torch.rand(1, generator=gen).item() < 1 / 8 else u(32, 512)
    if kind == "lognormal_1k":
        return max(1, int(math.exp(math.log(1024) + 1.0 * torch.randn(1, generator=gen).item())))
    raise ValueError(f"unknown distribution {kind!r}; accepted: {DISTRIBUTIONS}")


def packed_lengths(kind: str, rows: int, L: int, seed: int = 0) -> list[int]:
    """Segment lengths of ``rows`` packed rows of L tokens: documents in order, each row starting a
    new segment, a document cut at a row end continuing as a new segment in the next row."""
    gen = torch.Generator().manual_seed(seed)
    segs, carry = [], 0
    for _ in range(rows):
        left = L
        while left:
            n = carry or _draw(kind, L, gen)
            take = min(n, left)
            segs.append(take)
            left -= take
            carry = n - take
    return segs


BWD_FLOPS = 2.5  # the backward's FLOPs per forward FLOP (DESIGN.md section 7)


def causal_flops(lengths, hq, d) -> float:
    return 4.0 * hq * d * sum(l * (l + 1) / 2 for l in lengths)


# ------------------------------------------------------------------------------------------
# Providers: prepare(q, k, v, cu, lengths, L) -> fn() returning o in [T, Hq, D] layout
# (called inside the timed region), plus the leaf tensors whose grads are the outputs.
# ------------------------------------------------------------------------------------------


def prep_flamia(q, k, v, cu, lengths, L, recipe="bf16"):
    max_len = max(lengths)
    return lambda: flamia.attention(q, k, v, cu, max_len, recipe=recipe, impl="triton")


def prep_flamia_mxfp8(q, k, v, cu, lengths, L):
    return prep_flamia(q, k, v, cu, lengths, L, recipe="mxfp8")


def prep_flamia_fp8_rowwise(q, k, v, cu, lengths, L):
    return prep_flamia(q, k, v, cu, lengths, L, recipe="fp8_rowwise")


def prep_flamia_nvfp4(q, k, v, cu, lengths, L):
    return prep_flamia(q, k, v, cu, lengths, L, recipe="nvfp4_fp8")


_flex_compiled = None


def prep_flex(q, k, v, cu, lengths, L):
    global _flex_compiled
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    if _flex_compiled is None:
        _flex_compiled = torch.compile(flex_attention)
    total, hq, _ = q.shape
    doc = torch.repeat_interleave(torch.arange(len(lengths), device=q.device),
                                  torch.tensor(lengths, device=q.device))

    def mask_mod(b, h, qi, ki):
        return (doc[qi] == doc[ki]) & (ki <= qi)

    block_mask = create_block_mask(mask_mod, None, None, total, total, device=q.device)
    gqa = k.shape[1] != hq
    # [T, H, D] -> [1, H, T, D] views (no copy); flex reads strided inputs.
    to_flex = lambda t: t.transpose(0, 1).unsqueeze(0)

    def run():
        o = _flex_compiled(to_flex(q), to_flex(k), to_flex(v), block_mask=block_mask,
                           enable_gqa=gqa)
        return o.squeeze(0).transpose(0, 1)

    return run


def prep_varlen(q, k, v, cu, lengths, L):
    from torch.nn.attention.varlen import varlen_attn

    max_len = max(lengths)
    kw = {"window_size": (-1, 0)}
    params = inspect.signature(varlen_attn).parameters
    group = q.shape[1] // k.shape[1]
    if group > 1:
        if "enable_gqa" not in params:
            raise RuntimeError("varlen_attn of this torch has no GQA support (enable_gqa)")
        kw["enable_gqa"] = True
    return lambda: varlen_attn(q, k, v, cu, cu, max_len, max_len, **kw)


def prep_cudnn_dense(q, k, v, cu, lengths, L):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    if any(n != L for n in lengths):
        raise RuntimeError("dense causal is only valid with one document per row")
    total, hq, d = q.shape
    rows = total // L
    to_dense = lambda t: t.view(rows, L, t.shape[1], d).transpose(1, 2)
    gqa = k.shape[1] != hq

    def run():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            o = torch.nn.functional.scaled_dot_product_attention(
                to_dense(q), to_dense(k), to_dense(v), is_causal=True, enable_gqa=gqa)
        return o.transpose(1, 2).reshape(total, hq, d)

    return run


def prep_cudnn_thd(q, k, v, cu, lengths, L):
    """cuDNN's ragged (THD) BF16 attention through nvidia-cudnn-frontend's graph API: the packed
    [T, H, D] tensors are described as [segments, H, max_len, D] with row strides of the packed
    layout and per-segment ragged offsets cu_seqlens * H * D (elements), a padding mask from the
    segment lengths and a top-left causal band, so cuDNN reads the packed tensors in place.
    Forward and backward graphs are built once per workload (outside the timed call)."""
    import cudnn

    total, hq, d = q.shape
    hkv = k.shape[1]
    nseg, smax = len(lengths), max(lengths)
    dev = q.device
    seqlen = torch.tensor(lengths, dtype=torch.int32, device=dev).view(nseg, 1, 1, 1)
    ragged = {h: (cu.to(torch.int64) * h * d).view(nseg + 1, 1, 1, 1).contiguous()
              for h in {hq, hkv}}
    handle = cudnn.create_handle()
    cudnn.set_stream(handle=handle, stream=torch.cuda.current_stream().cuda_stream)
    bf16, f32 = cudnn.data_type.BFLOAT16, cudnn.data_type.FLOAT
    dims = lambda h: [nseg, h, smax, d]
    strides = lambda h: [smax * h * d, d, h * d, 1]
    band = {"diagonal_alignment": cudnn.diagonal_alignment.TOP_LEFT,
            "diagonal_band_right_bound": 0}  # key <= query: causal
    scale = d**-0.5

    def graph():
        return cudnn.pygraph(io_data_type=bf16, intermediate_data_type=f32,
                             compute_data_type=f32, handle=handle)

    def with_ragged_offset(g, t, h, pack):
        """Attach the per-segment ragged offsets of an h-head packed tensor to graph tensor t;
        registers the offset tensor's data in ``pack`` (graph tensor -> torch tensor)."""
        off = g.tensor_like(ragged[h])
        t.set_ragged_offset(off)
        pack[off] = ragged[h]
        return t

    def packed(g, name, h, pack):
        """A [segments, h, max_len, d] input view of a packed tensor."""
        t = g.tensor(name=name, dim=dims(h), stride=strides(h), data_type=bf16)
        return with_ragged_offset(g, t, h, pack)

    def packed_output(g, t, h, pack):
        t.set_output(True).set_dim(dims(h)).set_stride(strides(h))
        return with_ragged_offset(g, t, h, pack)

    def finish(g):
        g.validate()
        g.build_operation_graph()
        g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
        g.check_support()
        g.build_plans()

    # Forward graph
    gf, fixed_f = graph(), {}
    fq, fk, fv = (packed(gf, n, h, fixed_f) for n, h in (("q", hq), ("k", hkv), ("v", hkv)))
    sq_, skv_ = gf.tensor_like(seqlen), gf.tensor_like(seqlen)
    fixed_f.update({sq_: seqlen, skv_: seqlen})
    fo, fstats = gf.sdpa(name="sdpa", q=fq, k=fk, v=fv, generate_stats=True, attn_scale=scale,
                         use_padding_mask=True, seq_len_q=sq_, seq_len_kv=skv_, **band)
    packed_output(gf, fo, hq, fixed_f)
    fstats.set_output(True).set_data_type(f32)
    finish(gf)

    # Backward graph
    gb, fixed_b = graph(), {}
    bq, bk, bv, bo, bdo = (packed(gb, n, h, fixed_b) for n, h in
                           (("q", hq), ("k", hkv), ("v", hkv), ("o", hq), ("do", hq)))
    stats_buf = torch.empty(nseg, hq, smax, 1, dtype=torch.float32, device=dev)
    bstats = gb.tensor_like(stats_buf)
    bsq, bskv = gb.tensor_like(seqlen), gb.tensor_like(seqlen)
    fixed_b.update({bsq: seqlen, bskv: seqlen})
    max_t = (total + 63) // 64 * 64
    bdq, bdk, bdv = gb.sdpa_backward(
        name="sdpa_backward", q=bq, k=bk, v=bv, o=bo, dO=bdo, stats=bstats, attn_scale=scale,
        use_padding_mask=True, seq_len_q=bsq, seq_len_kv=bskv, max_total_seq_len_q=max_t,
        max_total_seq_len_kv=max_t, **band)
    for t, h in ((bdq, hq), (bdk, hkv), (bdv, hkv)):
        packed_output(gb, t, h, fixed_b)
    finish(gb)
    workspace = torch.empty(max(gf.get_workspace_size(), gb.get_workspace_size(), 1),
                            dtype=torch.uint8, device=dev)

    class CudnnThd(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q_, k_, v_):
            o_ = torch.empty_like(q_)
            stats = torch.empty_like(stats_buf)
            gf.execute({**fixed_f, fq: q_, fk: k_, fv: v_, fo: o_, fstats: stats}, workspace,
                       handle=handle)
            ctx.save_for_backward(q_, k_, v_, o_, stats)
            return o_

        @staticmethod
        def backward(ctx, do):
            q_, k_, v_, o_, stats = ctx.saved_tensors
            do = do.contiguous()
            dq, dk, dv = torch.empty_like(q_), torch.empty_like(k_), torch.empty_like(v_)
            gb.execute({**fixed_b, bq: q_, bk: k_, bv: v_, bo: o_, bdo: do, bstats: stats,
                        bdq: dq, bdk: dk, bdv: dv}, workspace, handle=handle)
            return dq, dk, dv

    return lambda: CudnnThd.apply(q, k, v)


PROVIDERS = {
    "flamia-bf16": prep_flamia,
    "flamia-bf16 (fused dQ)": prep_flamia,
    "flamia-bf16 (triton kernels)": prep_flamia,
    "flamia-bf16 (dK/dV lse by loads)": prep_flamia,
    "flamia-bf16 (persistent fwd)": prep_flamia,
    "flamia-bf16 (ws fwd)": prep_flamia,
    "flamia-bf16 (persistent fwd, dQ)": prep_flamia,
    "flamia-bf16 (delta kernel)": prep_flamia,
    "flamia-bf16 (ws dQ)": prep_flamia,
    "flamia-bf16 (persistent dK/dV)": prep_flamia,
    "flamia-bf16 (ws dK/dV)": prep_flamia,
    "flamia-bf16 (doc tiles)": prep_flamia,
    "flamia-bf16 (LPT order)": prep_flamia,
    "flamia-bf16 (A/A control)": prep_flamia,
    "flamia-bf16 (cached launch)": prep_flamia,
    "flamia-bf16 (triton launch)": prep_flamia,
    "flamia-mxfp8": prep_flamia_mxfp8,
    "flamia-mxfp8 (Gluon dK/dV)": prep_flamia_mxfp8,
    "flamia-mxfp8 (triton dK/dV)": prep_flamia_mxfp8,
    "flamia-mxfp8 (LPT order)": prep_flamia_mxfp8,
    "flamia-mxfp8 (Gluon dK/dV pair steps)": prep_flamia_mxfp8,
    "flamia-mxfp8 (Gluon dK/dV wait steps)": prep_flamia_mxfp8,
    "flamia-fp8_rowwise": prep_flamia_fp8_rowwise,
    # NVFP4 Q/K are emulated on Hopper: QK^T, dQ, dK run as bf16 MMAs on exact NVFP4 values
    "flamia-nvfp4_fp8 (emulated NVFP4)": prep_flamia_nvfp4,
    "flamia-nvfp4_fp8 (emulated NVFP4, dK/dV wait steps)": prep_flamia_nvfp4,
    "flex": prep_flex,
    "varlen": prep_varlen,
    "cudnn-dense": prep_cudnn_dense,
    "cudnn-thd": prep_cudnn_thd,
}
BASELINES = ("flex", "varlen", "cudnn-dense", "cudnn-thd")
# Environment a provider is checked, timed and profiled under (the kernels read it at launch).
PROVIDER_ENV = {"flamia-bf16 (fused dQ)": {"FLAMIA_DQ": "fused"},
                "flamia-bf16 (triton kernels)": {"FLAMIA_FWD_KERNEL": "triton",
                                                 "FLAMIA_DQ_KERNEL": "triton",
                                                 "FLAMIA_DKDV_KERNEL": "triton"},
                # the Gluon FP8 dK/dV kernel (opt-in until the fifteenth session, now the default
                # on Hopper), the BF16 dK/dV kernel's former lse2/delta loads (TMA since
                # 2026-12-05), doc tiles (opt-in): H100 runs of 2026-12-05
                "flamia-mxfp8 (Gluon dK/dV)": {"FLAMIA_DKDV_KERNEL": "gluon"},
                # the triton FP8 dK/dV kernels (the default until the fifteenth session)
                "flamia-mxfp8 (triton dK/dV)": {"FLAMIA_DKDV_KERNEL": "triton"},
                "flamia-bf16 (dK/dV lse by loads)": {"FLAMIA_GLUON_DKDV_LSE": "load"},
                "flamia-bf16 (doc tiles)": {"FLAMIA_TILES": "doc"},
                # tiles launched by work alone (the launch order before 2026-12-05 evening)
                "flamia-bf16 (LPT order)": {"FLAMIA_ORDER": "longest"},
                "flamia-mxfp8 (LPT order)": {"FLAMIA_ORDER": "longest"},
                # the Gluon FP8 dK/dV kernel's pair steps (H200, 2026-12-06: one document 5.20
                # vs 5.52 ms for the triton kernels, U(32, 1024) 0.85 vs 0.81; H100, 2026-12-07:
                # fwd+bwd 3.5-10.9% slower than the default single steps on every workload)
                "flamia-mxfp8 (Gluon dK/dV pair steps)": {"FLAMIA_DKDV_KERNEL": "gluon",
                                                          "FLAMIA_GLUON_DKDV8": "3,pair"},
                # the Gluon FP8 dK/dV kernel's default before 2026-12-07 (each partition
                # waiting for its MMAs, 2 ring slots; now 3,pipe: 3-6% less dK/dV time on an H100)
                "flamia-mxfp8 (Gluon dK/dV wait steps)": {"FLAMIA_DKDV_KERNEL": "gluon",
                                                          "FLAMIA_GLUON_DKDV8": "2"},
                "flamia-nvfp4_fp8 (emulated NVFP4, dK/dV wait steps)": {
                    "FLAMIA_DKDV_KERNEL": "gluon", "FLAMIA_GLUON_DKDV8": "2"},
                # the persistent Gluon FP8 dK/dV kernel (twenty-sixth session), each recipe's
                # default schedule
                "flamia-mxfp8 (persistent dK/dV)": {"FLAMIA_DKDV_KERNEL": "gluon",
                                                    "FLAMIA_GLUON_DKDV8": "persistent"},
                "flamia-nvfp4_fp8 (emulated NVFP4, persistent dK/dV)": {
                    "FLAMIA_DKDV_KERNEL": "gluon", "FLAMIA_GLUON_DKDV8": "persistent"},
                # the persistent Gluon forward (2026-12-05, fourth session; the default since
                # 2026-12-06 but on short documents) and the former default; the persistent dQ
                # kernel: opt-in
                "flamia-bf16 (persistent fwd)": {"FLAMIA_GLUON_FWD": "128,128,8,2,persistent"},
                "flamia-bf16 (ws fwd)": {"FLAMIA_GLUON_FWD": "128,128,8,2,ws"},
                "flamia-bf16 (persistent fwd, dQ)": {"FLAMIA_GLUON_FWD": "128,128,8,2,persistent",
                                                     "FLAMIA_GLUON_DQ": "persistent"},
                # delta = rowsum(dO * O) by its own kernel, dK/dV before dQ (the default until
                # 2026-12-06, eleventh session; now the Gluon dQ kernel computes it)
                "flamia-bf16 (delta kernel)": {"FLAMIA_DELTA": "kernel"},
                # the warp-specialized dQ kernel (default until 2026-12-06, eleventh session)
                "flamia-bf16 (ws dQ)": {"FLAMIA_GLUON_DQ": "ws"},
                # the persistent dK/dV kernel (the default on grid tiles since the eleventh
                # session) and the warp-specialized one (the default before)
                "flamia-bf16 (persistent dK/dV)": {"FLAMIA_GLUON_DKDV": "2,0,persistent"},
                "flamia-bf16 (ws dK/dV)": {"FLAMIA_GLUON_DKDV": "2,0,ws"},
                # flamia-bf16 again, timed as another provider: the difference between the two
                # rows is the timing's noise (a GPU that throttles under load: H100, 2026-12-06)
                "flamia-bf16 (A/A control)": {},
                # mxfp8 with fp32 per-token scales (2026-12-06, sixteenth session): its speed
                # against mxfp8's, named with --providers only
                "flamia-fp8_rowwise": {},
                # the Gluon kernels launched through their compiled kernels' launchers
                # (flamia/kernels/launch.py; the default since 2026-12-06, thirteenth session)
                # and through triton's JIT launch (the default before)
                "flamia-bf16 (cached launch)": {"FLAMIA_LAUNCH": "cached"},
                "flamia-bf16 (triton launch)": {"FLAMIA_LAUNCH": "jit"}}


def provider_env(name: str):
    """The provider's PROVIDER_ENV set in os.environ for the block (the kernels read it at
    launch), restored after."""
    return mock.patch.dict(os.environ, PROVIDER_ENV.get(name, {}))


# The full grid leaves out the fused-dQ variant (slower, bench/results/dq_diagnose_20261203_H200.txt);
# name it with --providers to include it.
DEFAULT_PROVIDERS = [name for name in PROVIDERS if name not in PROVIDER_ENV]

# Correctness gate before timing (relative L2 error vs the fp32 reference): bf16 providers sit
# near 3e-3; FP8 recipes sit near their input-quantization floor (~4-6%, DESIGN.md s6), so their
# gate only proves that attention is computed; their precision is the accuracy table's job.
# The FP8 gates are per recipe, so every kernel variant of a recipe gets its recipe's.
FP8_CHECK_TOL = {"mxfp8": 0.12, "nvfp4_fp8": 0.25, "fp8_rowwise": 0.12}
FP8_PROVIDERS = tuple(name for name in PROVIDERS if name.startswith("flamia-") and any(
    recipe in name for recipe in FP8_CHECK_TOL))


def check_tol(name: str, bf16_tol: float) -> float:
    """The correctness gate of provider ``name``: its FP8 recipe's, else ``bf16_tol``."""
    if name not in FP8_PROVIDERS:
        return bf16_tol
    return next(tol for recipe, tol in FP8_CHECK_TOL.items() if recipe in name)


# ------------------------------------------------------------------------------------------
# Correctness and timing
# ------------------------------------------------------------------------------------------


def segment_reference(q, k, v, do, lengths):
    """O, dQ, dK, dV in float32, one causal SDPA per segment (autograd), through the
    memory-efficient backend (the math backend would materialize [H, l, l] fp32 matrices)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    group = q.shape[1] // k.shape[1]
    qs, ks, vs = (t.detach().float().requires_grad_(True) for t in (q, k, v))
    outs, start = [], 0
    for n in lengths:
        sl = slice(start, start + n)
        tq = qs[sl].transpose(0, 1).unsqueeze(0)  # [1, H, l, D]: the fused kernels want 4-D
        tk = ks[sl].repeat_interleave(group, 1).transpose(0, 1).unsqueeze(0)
        tv = vs[sl].repeat_interleave(group, 1).transpose(0, 1).unsqueeze(0)
        with sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION):
            o_seg = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
        outs.append(o_seg.squeeze(0).transpose(0, 1))
        start += n
    o = torch.cat(outs)
    with sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION):
        o.backward(do.float())
    return o.detach(), qs.grad, ks.grad, vs.grad


def check(fn, q, k, v, do, ref):
    for t in (q, k, v):
        t.grad = None
    o = fn()
    o.backward(do)
    errs = {}
    for name, a, b in zip(("O", "dQ", "dK", "dV"), (o, q.grad, k.grad, v.grad), ref):
        errs[name] = ((a.float() - b).norm() / b.norm()).item()
        if not torch.isfinite(a).all():
            errs[name] = float("inf")
    return errs


def round_orders(names: list[str], rounds: int) -> list[list[str]]:
    """The providers' timing order in each round: as given, then reversed, alternately. A GPU
    under sustained load runs slower as it heats (H100, 2026-12-06: the same backward kernels
    3-5% longer after 300 calls of another provider), so a provider always timed after the
    others would pay for their heat; over an even number of alternating rounds every provider's
    positions add up to the same number, which cancels a linear drift in the mean of its round
    medians."""
    if rounds < 1:
        raise ValueError(f"rounds={rounds}; accepted: 1 or more (an even number balances drift)")
    return [list(names) if r % 2 == 0 else list(reversed(names)) for r in range(rounds)]


def time_provider(fn, q, k, v, do, rounds=1):
    """(forward ms, fwd+bwd ms) medians of do_bench over one round's share of the repetitions
    (200 ms forward, 300 ms fwd+bwd in all)."""
    from triton.testing import do_bench

    def fwd_bwd():
        fn().backward(do)

    fwd = do_bench(fn, warmup=50, rep=max(200 // rounds, 25), return_mode="median")
    both = do_bench(fwd_bwd, warmup=50, rep=max(300 // rounds, 25), grad_to_none=[q, k, v],
                    return_mode="median")
    return fwd, both


def error_text(e: Exception) -> str:
    """A provider's failure as a result row records it: the exception's type and the first line
    of its message (200 characters at most)."""
    lines = str(e).splitlines()
    return f"{type(e).__name__}: {lines[0][:200] if lines else ''}"


def fwd_bwd_once(fn, q, k, v, do):
    """One fwd+bwd call of a provider, its input gradients cleared first."""
    for t in (q, k, v):
        t.grad = None
    fn().backward(do)


def host_ms(call, sync, iters=20) -> float:
    """Median host time of ``call`` (ms) from an idle GPU: each call starts after ``sync`` and is
    timed until it returns, so nothing waits for queued GPU work unless the call itself
    synchronizes. A provider whose host time is near its timed GPU time is host-bound: its
    timing then measures the host (2026-12-06: U(32, 1024), about 1.0-1.2 ms of host time per
    flamia-bf16 fwd+bwd against 1.25 ms of kernels)."""
    times = []
    for _ in range(iters):
        sync()
        t0 = time.perf_counter()
        call()
        times.append((time.perf_counter() - t0) * 1e3)
    sync()
    times.sort()
    return times[len(times) // 2]


def kernel_profile(fn, q, k, v, do, iters=5, warm=100) -> dict[str, float]:
    """Where one fwd+bwd call's GPU time goes: ms per call of each CUDA kernel (torch.profiler),
    largest first. Names are the kernels' own (Triton function names, torch copy kernels).
    Profiled after ``warm`` calls back to back, as the timed calls run after do_bench's warm-up
    (until 2026-12-06 after one call: the persistent forward's timed fwd+bwd was then up to
    0.3 ms above its kernels' sum, maybe clocks lowered under sustained load: GpuSampler)."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    for _ in range(warm):
        fwd_bwd_once(fn, q, k, v, do)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            fwd_bwd_once(fn, q, k, v, do)
        torch.cuda.synchronize()
    times: dict[str, float] = {}
    for e in prof.key_averages():
        if e.device_type != DeviceType.CUDA:  # kernels only: CPU ops would count them twice
            continue
        t = getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0)
        if t > 0 and e.key:
            times[e.key[:80]] = times.get(e.key[:80], 0.0) + t / 1e3 / iters
    return dict(sorted(times.items(), key=lambda kv: -kv[1]))


class GpuSampler:
    """The GPU's SM clock (MHz) and power (W) sampled every ``interval_ms`` (0: not at all) by
    nvidia-smi while the block runs (the timed calls): ``rows`` are the [sm MHz, max sm MHz,
    power W] samples, ``summary`` is gpu_summary(rows), or None where nvidia-smi cannot be run
    or gave no sample."""

    def __init__(self, interval_ms: int = 100):
        self.interval_ms = interval_ms
        self.rows: list[list[float]] = []
        self.summary = None
        self._proc = None

    def __enter__(self):
        if self.interval_ms <= 0:  # sampling off
            return self
        try:
            self._proc = subprocess.Popen(
                ["nvidia-smi", "--query-gpu=clocks.sm,clocks.max.sm,power.draw",
                 "--format=csv,noheader,nounits", "-lms", str(self.interval_ms), "-i",
                 str(torch.cuda.current_device())],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        except OSError:
            self._proc = None
        return self

    def __exit__(self, *exc):
        if self._proc is None:
            return False
        self._proc.terminate()
        try:
            out, _ = self._proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            out, _ = self._proc.communicate()
        for line in out.splitlines():
            try:
                row = [float(x) for x in line.split(",")]
            except ValueError:  # a header, "[N/A]", an error text
                continue
            if len(row) == 3:
                self.rows.append(row)
        self.summary = gpu_summary(self.rows)
        return False


def gpu_summary(rows: list[list[float]]) -> dict | None:
    """{"sm_mhz": median, "sm_mhz_min", "sm_max_mhz", "power_w": median, "samples"} of
    GpuSampler rows (None for none). A median clock below the maximum says the timing ran
    throttled (read after the calls instead, the clock is already the idle one)."""
    if not rows:
        return None
    sm = sorted(r[0] for r in rows)
    power = sorted(r[2] for r in rows)
    return {"sm_mhz": sm[len(sm) // 2], "sm_mhz_min": sm[0], "sm_max_mhz": rows[0][1],
            "power_w": power[len(power) // 2], "samples": len(rows)}


def environment() -> dict:
    import triton

    env = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else "none",
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.cuda.is_available() else None,
        "python": platform.python_version(),
        "command": " ".join(["python -m bench.attention"] + sys.argv[1:]),
        # the settings that change what runs (FLAMIA_AUTOTUNE, FLAMIA_FP8_MMA, ...)
        "flamia_env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("FLAMIA_")},
    }
    try:
        def git(*args):
            return subprocess.run(["git", *args], capture_output=True, text=True).stdout.strip()

        env["git_commit"] = git("rev-parse", "--short", "HEAD")
        # a run from a working tree with changes is not that commit: say so
        env["git_uncommitted_changes"] = bool(git("status", "--porcelain", "--untracked-files=no"))
    except OSError:
        pass
    # The git metadata of a copied tree can be stale (2026-12-03: the device copy reported the
    # session's first commit); this hash of the code that ran can be checked against any commit
    # with ``python -m bench.attention --source-hash``.
    env["source_sha256"] = source_hash()
    return env


def source_hash() -> str:
    """sha256 over the paths and contents of flamia/**/*.py and bench/*.py (the kernels, their
    launchers and this harness), first 16 hex digits."""
    import hashlib

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    digest = hashlib.sha256()
    for folder in ("flamia", "bench"):
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, folder)):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and d != "results")
            for name in sorted(f for f in filenames if f.endswith(".py")):
                path = os.path.join(dirpath, name)
                digest.update(os.path.relpath(path, root).encode() + b"\0")
                with open(path, "rb") as f:
                    digest.update(f.read() + b"\0")
    return digest.hexdigest()[:16]


def workload_inputs(dist, rows, L, hq, hkv, d, seed=0):
    """Segment lengths, q, k, v (requiring grad), dO and cu_seqlens of one workload, on the GPU."""
    lengths = packed_lengths(dist, rows, L, seed)
    total = rows * L
    gen = torch.Generator(device="cuda").manual_seed(seed)
    mk = lambda h: torch.randn(total, h, d, device="cuda", dtype=torch.bfloat16, generator=gen)
    q, k, v, do = mk(hq).requires_grad_(), mk(hkv).requires_grad_(), mk(hkv).requires_grad_(), mk(hq)
    cu = torch.zeros(len(lengths) + 1, dtype=torch.int32, device="cuda")
    cu[1:] = torch.cumsum(torch.tensor(lengths, device="cuda"), 0)
    return lengths, q, k, v, do, cu


def run_workload(dist, rows, L, hq, hkv, d, providers, seed=0, tol=2e-2, profile=False,
                 rounds=4, sample_ms=100, keep_gc=False):
    """All providers on one workload: same inputs, each checked, then all timed in ``rounds``
    rounds in alternating order (round_orders); a provider's time is the mean of its round
    medians, each round's median kept in the row."""
    lengths, q, k, v, do, cu = workload_inputs(dist, rows, L, hq, hkv, d, seed)
    total = rows * L
    ref = segment_reference(q, k, v, do, lengths)
    flops = causal_flops(lengths, hq, d)
    results = {}
    fns = {}
    for name in providers:
        row = {"workload": dist, "rows": rows, "L": L, "Hq": hq, "Hkv": hkv, "D": d,
               "segments": len(lengths), "provider": name}
        results[name] = row
        # Its PROVIDER_ENV while it is built and checked, and again while timed and profiled.
        with provider_env(name):
            try:
                fn = PROVIDERS[name](q, k, v, cu, lengths, L)
                errs = check(fn, q, k, v, do, ref)
                row["rel_err"] = errs
                print(f"  {dist} {name}: checked, rel err " +
                      " ".join(f"{n} {e:.1e}" for n, e in errs.items()), flush=True)
                if name in FP8_PROVIDERS and not INREG_ROW_SCALES:
                    # the timing experiment of FLAMIA_UNSAFE_NO_INREG_SCALES: wrong by design
                    row["experiment"] = "no in-register row scales: wrong values, timing only"
                    fns[name] = fn
                elif max(errs.values()) > check_tol(name, tol):
                    row["error"] = f"failed correctness check (rel err {errs}), not timed"
                else:
                    fns[name] = fn
            except Exception as e:  # a provider that cannot run this workload is reported, not hidden
                row["error"] = error_text(e)
    samples = {name: [] for name in fns}
    # Python's garbage collector is off while timing (as timeit does, and as torchtitan's trainer
    # runs, collecting every training.gc_freq steps): a full collection walks every object of the
    # process (compiled FlexAttention graphs, every provider's state) and lands in the calls of
    # whichever provider allocates most on the host. keep_gc: leave it on.
    gc_was_on = gc.isenabled()
    if not keep_gc:
        gc.collect()
        gc.disable()
    try:
        for order in round_orders(list(fns), rounds):
            for name in order:
                if name not in fns:  # failed in an earlier round
                    continue
                row = results[name]
                with provider_env(name):
                    try:
                        with GpuSampler(sample_ms) as gpu:
                            fwd, both = time_provider(fns[name], q, k, v, do, rounds)
                    except Exception as e:
                        row["error"] = error_text(e)
                        del fns[name]
                        continue
                samples[name] += gpu.rows
                row.setdefault("fwd_ms_rounds", []).append(fwd)
                row.setdefault("fwd_bwd_ms_rounds", []).append(both)
        for name, fn in fns.items():
            with provider_env(name):
                try:
                    results[name]["host_fwd_bwd_ms"] = host_ms(
                        lambda: fwd_bwd_once(fn, q, k, v, do), torch.cuda.synchronize)
                except Exception as e:  # timed already: keep its times, say why no host time
                    results[name]["host_error"] = error_text(e)
    finally:
        if gc_was_on:
            gc.enable()
    for name, fn in fns.items():
        row = results[name]
        fwd = sum(row["fwd_ms_rounds"]) / len(row["fwd_ms_rounds"])
        both = sum(row["fwd_bwd_ms_rounds"]) / len(row["fwd_bwd_ms_rounds"])
        row["gpu_while_timed"] = gpu_summary(samples[name])
        row.update(fwd_ms=fwd, fwd_bwd_ms=both, bwd_ms=both - fwd,
                   fwd_tflops=flops / fwd * 1e-9, bwd_tflops=BWD_FLOPS * flops / (both - fwd) * 1e-9,
                   fwd_bwd_tflops=(1 + BWD_FLOPS) * flops / both * 1e-9)
        if profile and name.startswith("flamia"):
            with provider_env(name):
                row["profile_ms"] = kernel_profile(fn, q, k, v, do)
    del fns
    torch.cuda.empty_cache()
    results = list(results.values())
    # Per-batch plan cost of flamia (outside the timed call, amortized over layers).
    from triton.testing import do_bench
    plan_ms = do_bench(lambda: batch_plan(cu, total, d), warmup=10, rep=50, return_mode="median")
    for r in results:
        if r["provider"].startswith("flamia"):
            r["plan_ms_per_batch"] = plan_ms
    base = [r["fwd_bwd_ms"] for r in results if r["provider"] in BASELINES and "fwd_bwd_ms" in r]
    for r in results:
        if "fwd_bwd_ms" in r and base:
            r["speedup_vs_fastest_baseline"] = min(base) / r["fwd_bwd_ms"]
    return results


def format_table(results) -> str:
    lines = ["| workload | Hq/Hkv | D | segs | provider | fwd ms | bwd ms | fwd+bwd ms | fwd TF/s "
             "| bwd TF/s | fwd+bwd TF/s | vs best baseline | max rel err | round spread "
             "| host ms |",
             "|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        head = (f"| {r['workload']} | {r['Hq']}/{r['Hkv']} | {r['D']} | {r['segments']} | "
                f"{r['provider']} |")
        err = max(r["rel_err"].values()) if "rel_err" in r else float("nan")
        if "fwd_bwd_ms" not in r:
            lines.append(head + " - |" * 7 + f" {err:.1e} ({r.get('error', '')}) | - | - |")
            continue
        sp = r.get("speedup_vs_fastest_baseline", float("nan"))
        # (slowest - fastest) round median of fwd+bwd over their mean: the timing's own noise
        rounds = r.get("fwd_bwd_ms_rounds") or [r["fwd_bwd_ms"]]
        spread = (max(rounds) - min(rounds)) / r["fwd_bwd_ms"]
        # host time of one fwd+bwd call from an idle GPU (host_ms); near the timed fwd+bwd
        # the row measured the host, not the GPU
        host = f"{r['host_fwd_bwd_ms']:.3f}" if "host_fwd_bwd_ms" in r else "-"
        lines.append(head + f" {r['fwd_ms']:.3f} | {r['bwd_ms']:.3f} | {r['fwd_bwd_ms']:.3f} | "
                     f"{r['fwd_tflops']:.0f} | {r['bwd_tflops']:.0f} | {r['fwd_bwd_tflops']:.0f} | "
                     f"{sp:.2f}x | {err:.1e} | {100 * spread:.1f}% | {host} |")
    return "\n".join(lines)


def format_profiles(results) -> str:
    """Per-kernel GPU ms of one fwd+bwd call, for the rows profiled (--profile)."""
    out = []
    for r in results:
        if "profile_ms" not in r:
            continue
        total = sum(r["profile_ms"].values())
        gpu = r.get("gpu_while_timed")
        clock = (f"; while timed SM clock median {gpu['sm_mhz']:.0f} (min {gpu['sm_mhz_min']:.0f},"
                 f" max {gpu['sm_max_mhz']:.0f}) MHz, {gpu['power_w']:.0f} W" if gpu else "")
        out.append(f"### {r['workload']} D={r['D']} {r['provider']}: {total:.3f} ms of kernels "
                   f"per fwd+bwd (timed {r['fwd_bwd_ms']:.3f} ms{clock})\n")
        out += [f"- {ms:.3f} ms ({100 * ms / total:.0f}%) {name}" for name, ms in r["profile_ms"].items()
                if ms >= 0.005]
        out.append("")
    return ("## Where the time goes (torch.profiler, GPU kernels per fwd+bwd call)\n\n"
            + "\n".join(out)) if out else ""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="two workloads, for a smoke run")
    ap.add_argument("--providers", nargs="+", default=DEFAULT_PROVIDERS, choices=list(PROVIDERS),
                    help="default: all but the opt-in variants (%(default)s)")
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--tag", default="")
    ap.add_argument("--accuracy", action="store_true",
                    help="also print/write the accuracy table (flamia.report) with the kernels")
    ap.add_argument("--dists", nargs="+", choices=DISTRIBUTIONS,
                    help="these distributions only (with --quick: B=4, L=8k, Hq=Hkv=16, D=128; "
                    "else their rows of the full grid)")
    ap.add_argument("--rounds", type=int, default=4,
                    help="timing rounds per workload, in alternating provider order (default 4)")
    ap.add_argument("--sample-ms", type=int, default=100,
                    help="nvidia-smi's sampling period of the SM clock and power while timing; "
                    "0: no sampling (default 100)")
    ap.add_argument("--keep-gc", action="store_true",
                    help="leave Python's garbage collector on while timing (default: off)")
    ap.add_argument("--profile", action="store_true",
                    help="also record each flamia provider's GPU time per kernel (torch.profiler)")
    ap.add_argument("--source-hash", action="store_true",
                    help="print this tree's source_sha256 (as recorded in results) and exit")
    args = ap.parse_args(argv)
    if args.source_hash:
        print(source_hash())
        return
    if not torch.cuda.is_available():
        sys.exit("bench/attention.py needs a CUDA GPU")
    # (distribution, rows, L, Hq, Hkv, D)
    grid = [(dist, 4, 8192, 16, 16, 128) for dist in DISTRIBUTIONS]
    grid += [(dist, 4, 8192, 16, 16, 64) for dist in ("one_doc", "lognormal_1k")]
    grid += [(dist, 2, 16384, 32, 8, 128) for dist in ("one_doc", "lognormal_1k")]
    if args.quick:
        grid = [(dist, 4, 8192, 16, 16, 128) for dist in (args.dists or ("one_doc", "lognormal_1k"))]
    elif args.dists:  # the full grid's rows of these workloads (every D and head count)
        grid = [row for row in grid if row[0] in args.dists]
    env = environment()
    os.makedirs(args.out, exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M")
    gpu = env["gpu"].replace(" ", "_")
    base = os.path.join(args.out, f"attention_{stamp}_{gpu}{args.tag}")
    results = []
    for w in grid:
        try:
            res = run_workload(*w, providers=args.providers, profile=args.profile,
                               rounds=args.rounds, sample_ms=args.sample_ms,
                               keep_gc=args.keep_gc)
        except torch.OutOfMemoryError as e:  # the reference of a huge workload: report, go on
            res = [{"workload": w[0], "rows": w[1], "L": w[2], "Hq": w[3], "Hkv": w[4], "D": w[5],
                    "segments": -1, "provider": "all", "error": f"OOM: {str(e)[:120]}"}]
        results += res
        torch.cuda.empty_cache()
        for r in res:
            msg = r.get("error") or f"{r['fwd_bwd_ms']:.3f} ms fwd+bwd, {r['fwd_bwd_tflops']:.0f} TF/s"
            print(f"{w[0]:>13} Hq{w[3]}/{w[4]} D{w[5]} {r['provider']:>12}: {msg}", flush=True)
        table = format_table(results)  # written after every workload: a crash keeps the rest
        with open(base + ".json", "w") as f:
            json.dump({"env": env, "results": results}, f, indent=1)
        with open(base + ".md", "w") as f:
            f.write(f"# Attention benchmark, {env['gpu']}, {env['date']}\n\n")
            f.write("Environment: " + ", ".join(f"{k}={v}" for k, v in env.items()) + "\n\n")
            if not INREG_ROW_SCALES:
                f.write("**Timing experiment (FLAMIA_UNSAFE_NO_INREG_SCALES=1): the FP8 "
                        "providers cast P' and dS' without their row scales, so their values "
                        "are wrong (not checked); their times show what those scales cost.**\n\n")
            f.write(table + "\n")
    print("\n" + table)
    profiles = format_profiles(results)
    if profiles:
        print("\n" + profiles)
        with open(base + ".md", "a") as f:
            f.write("\n" + profiles + "\n")
    if args.accuracy:
        from flamia.report import accuracy_checks, accuracy_rows, format_accuracy

        acc = accuracy_rows("triton", total=512, hq=2, hkv=2, d=128, device="cuda")
        checks = accuracy_checks(acc)
        text = ("\n## Accuracy (relative L2 error vs float64 exact; T=512, one document, H=2, "
                "D=128; impl column: triton where the recipe has a kernel)\n\n"
                + format_accuracy(acc) + "\n\n"
                + "\n".join(f"- {'PASS' if ok else 'FAIL'} {t}" for t, ok in checks) + "\n")
        print(text)
        with open(base + ".md", "a") as f:
            f.write(text)
        with open(base + ".json") as f:
            blob = json.load(f)
        blob["accuracy"] = acc
        blob["accuracy_checks"] = checks
        with open(base + ".json", "w") as f:
            json.dump(blob, f, indent=1)
    print(f"\nwritten: {base}.json, {base}.md")


if __name__ == "__main__":
    main()
