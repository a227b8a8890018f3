"""Hopper (sm_90) BF16 forward, dQ and dK/dV kernels written in Gluon, triton's lower-level dialect.

The forward (FLAMIA_FWD_KERNEL) is the same function as the triton forward of
kernels/attention.py (same key tiles visited, same masking, same softmax convention and outputs;
128-wide key tiles instead of 64, so P is rounded to bf16 against other running maxima: O agrees
to ~1e-5 relative), built the way FlashAttention-3 builds its forward:

- warp specialization (_attn_fwd_hopper_ws_kernel; doc tiles' default): the 128 query rows of a tile
  are two consumer warpgroups, each its own partition, and one producer warp issues every TMA
  load; a consumer releases a ring slot by an mbarrier arrival once its MMAs have read it, so
  the two warpgroups never meet at a CTA barrier and drift out of phase (one's softmax beside
  the other's MMAs). H200 (bench/results/fwd_variants_20261204_H200.txt): one document 2.12 vs
  2.47 ms for the plain kernel, lognormal 1k 0.78-0.81 vs 0.85, U(32, 1024) 0.38-0.40 vs 0.42;
  the same bits as the plain kernel. Optional ping-pong turns between the warpgroups
  (FlashAttention-3's schedule, FLAMIA_GLUON_FWD=128,128,8,2,pingpong) measured no faster;
- persistent (_attn_fwd_hopper_persistent_kernel, FLAMIA_GLUON_FWD=128,128,8,2,persistent; the
  default since 2026-12-06, see DEFAULT_MODE): the warp-specialized forward with one program per
  SM taking the (head, tile) work items in turn, the next tile's Q and first K/V loaded while the
  consumers finish the current one. Same bits (GPU test); on an H100 (2026-12-05,
  bench/results/fwd_variants_20261205_H100.txt) 4-7% less kernel time on short documents
  (U(32, 1024) 0.454 vs 0.472 ms, lognormal 1k 0.844 vs 0.906), one document 2.10 vs 1.99 ms in
  that run and equal in the quick benchmark (work items then dealt round-robin, later in snake
  order); the persistent dQ kernel (FLAMIA_GLUON_DQ=persistent) is built the same way: same
  bits, no faster (2026-12-05 18:23; the default since 2026-12-06, eleventh session, when it
  also computes delta: DQ_DEFAULT_MODE), and so is the persistent dK/dV kernel (the default
  since the same session: dkdv_persistent). In the grouped launch order a static deal is unbalanced
  (bench.tile_model), so since the evening of 2026-12-05 both take their items from a work queue
  (_take_item; H200 2026-12-06: same bits, GPU tests pass; 1-7% less kernel time). With 64-wide
  key tiles it is also the short-document forward (SHORT_DOCS_CONFIG);
- the plain kernel (_attn_fwd_hopper_kernel, FLAMIA_GLUON_FWD=M,N,W,S): 8 warps, the ring refilled
  by the warpgroups themselves after a CTA barrier (both warpgroups read each slot, and a
  warpgroup_mma_wait only covers the MMAs of the warpgroup that waits); Nsight Compute put 23%
  of its stalls there (bench/results/ncu_gluon_fwd_20261203_H200.txt);
- in both, asynchronous warpgroup MMAs: step n issues S_n = Q K_n^T and O += P_{n-1} V_{n-1}
  together and waits for S_n only, so that the softmax of S_n can run while the tensor cores
  compute P_{n-1} V_{n-1}. In the SASS, ptxas puts the wait for P V right after the row maximum,
  so the exponentials run after it (bench/gluon_report.py counts them); forcing them before the
  wait measured slower (see _fwd_step);
- K and V tiles by TMA into a ring of shared-memory slots with one mbarrier per slot and operand
  (S_n can start before V_n has arrived); no branch inside a pipelined step (masked and unmasked
  key tiles run in separate loops); O written by one TMA store that clips rows past the last token.

The dQ kernel (_attn_bwd_dq_hopper_kernel, FLAMIA_DQ_KERNEL) computes what the triton dQ kernel
computes, on the same tiles: K/V by TMA into a ring, S = Q K^T and dP = dO V^T issued together,
P computed while dP runs, dQ += dS K. By default warp-specialized like the forward
(_attn_bwd_dq_hopper_ws_kernel; FLAMIA_GLUON_DQ=plain: the 8-warp kernel): H200
(bench/results/dq_variants_20261204_H200.txt) one document 2.44 ms vs 3.03 for the triton kernel
and 3.06 for the plain one, lognormal 1k 0.85 vs 1.09 / 0.98, U(32, 1024) 0.43 vs 0.57 / 0.45.

The dK/dV kernel (FLAMIA_DKDV_KERNEL) computes the triton dK/dV kernel's function on its tiles
(64 queries x 128 keys, the keys the MMAs' M dimension). By default warp-specialized like the
forward (_attn_bwd_dkdv_hopper_ws_kernel: two consumer warpgroups of 64 keys with their own K/V
halves, a producer warp for the Q/dO ring); H200 (bench/results/dkdv_variants_20261204_H200.txt,
run 4): one document 3.85 ms vs 4.23 for the triton kernel and 4.59 for the plain Gluon kernel,
lognormal 1k 1.28 vs 1.53 / 1.50, U(32, 1024) 0.60 vs 0.72 / 0.69; the same bits as the plain
kernel. By default (dkdv_lse_mode, FLAMIA_GLUON_DKDV_LSE=tma) its producer also brings each
query tile's lse2 and delta by TMA, instead of the consumers' global loads at the top of every
step (FLAMIA_GLUON_DKDV_LSE=load; compiled as launched, triton 3.6, bench/gluon_report.py
--launchers: unmasked step 319 + 321 SASS instructions instead of 358 + 364 with GQA 8/2, and
no spills where the loads spill 192-236 B per thread with GQA); the same bits (GPU test), 12-13%
less dK/dV time on an H100 (2026-12-05, see dkdv_lse_mode).
The plain kernel (_attn_bwd_dkdv_hopper_kernel) remains for FLAMIA_DQ=fused (it adds dQ in
key-tile order, slower: same file, runs 2-3) and the pipeline sweeps (FLAMIA_GLUON_DKDV).

The FP8 forward (_attn_fwd8_hopper_ws_kernel, mxfp8 and nvfp4_fp8) is the triton FP8 forward's
function in the warp-specialized structure: 128 queries (two consumer warpgroups) x 64 keys (the
recipe's P' group), E4M3 MMAs for S = Q K^T (bf16 for nvfp4_fp8's NVFP4 values) and for
X = P' V from V's token-contiguous copy, O updated as the triton kernel updates it; the GPU tests
find the same bits as the triton kernel on every case. It runs only when asked for
(FLAMIA_FWD_KERNEL=gluon): on the H200 it is no faster (one document 2.62 vs 2.58 ms, U(32, 1024)
0.51 vs 0.42; bench/results/fwd8_variants_20261204_H200.txt). Its unmasked step is 577 SASS
instructions per warp (the triton kernel's 599) against 277 tensor-core cycles of FP8 MMAs per
warpgroup, and the measured rate (about 2600 SM cycles per pair of steps, two warpgroups) is
twice what issuing those instructions takes (1154 cycles on 4 schedulers): the step's dependent
chain (S row maximum, exponentials, P' row maximum, scaling, E4M3 cast, operand shuffle) with
two warps per scheduler, not the MMAs, sets the pace; overlapping the MMAs differently
(FLAMIA_GLUON_FWD8=overlap) did not change it, and neither did two such chains per warp (pair
steps, measured slower on the H200 on 2026-12-06 and removed, see FWD8_MODES).

The FP8 dK/dV kernel (_attn_bwd_dkdv8_hopper_ws_kernel, mxfp8 and nvfp4_fp8) is the triton FP8
dK/dV kernels' function on their 64 x 64 tiles in one kernel where triton runs two (a dV-only
and a dK-only kernel, each recomputing S^T and P^T): a P partition (S^T, P^T, dV) hands P^T to a
dS partition (dP^T, dS^T, dK) through shared memory; see DKDV8_CONFIG. The default on Hopper
since 2026-12-06 (kernels.attention.dkdv_kernel). Written on 2026-12-05 without a GPU: it
compiles for sm_90 with no spills (168 registers; per 64 x 64 pair 430 SASS instructions per
warp in the P partition and 423 in the dS partition, against 446 + 585 for the triton dV-only
and dK-only kernels; triton 3.6, bench/gluon_report.py). On an H100 (2026-12-05): bitwise equal
to the triton kernels and probes exactly 0 (GPU tests), dK/dV kernel one document 5.49 vs 5.65
ms, lognormal 1k 1.90 vs 1.99 ms (bench/results/attention_20261205-1449_*). Since 2026-12-07
mxfp8's runs in flight over 3 ring slots (DKDV8_SCHEDULE).

The three BF16 kernels run by default on GPUs of compute capability 9.x (FLAMIA_FWD_KERNEL / FLAMIA_DQ_KERNEL /
FLAMIA_DKDV_KERNEL = auto, the default, or gluon; see kernels.attention.fwd_kernel, dq_kernel,
dkdv_kernel).
Gluon has no interpreter: they are tested on the GPU tier only (tests/test_kernels_hopper.py),
against the triton kernels and float64; CI compiles them for sm_90 (tests/test_compile.py).
"""

from __future__ import annotations

import dataclasses
import functools
import os

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared, mbarrier, tma, warpgroup_mma, warpgroup_mma_wait)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from . import cuda_major, sm_count
from .launch import launch
from .quantize import INREG_ROW_SCALES, e8m0_exponent, pow2

# Renamed after triton 3.6 (the H200 image's); CI's triton 3.9 compiles this module too.
tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared
tma_store = getattr(tma, "async_store", None) or tma.async_copy_shared_to_global
cta_barrier = getattr(gl, "thread_barrier", None) or gl.barrier  # renamed likewise

LOG2E = 1.4426950408889634
# Tile shape and pipeline (BLOCK_M, BLOCK_N, warps, ring slots): one warpgroup (4 warps) per 64
# query rows, the layout's rule (warps_per_cta [warps, 1], 16 rows per warp). Default: 128 x 128
# on 8 warps with 2 K/V slots, the fastest of bench/gluon_variants.py's sweep on the H200 (3 slots,
# 224 KB of shared memory at D = 128, and 64 x 64 on 4 warps were not faster).
# FLAMIA_GLUON_FWD="M,N,W,S" overrides it with the plain kernel; "M,N,W,S,ws" runs the
# warp-specialized forward (_attn_fwd_hopper_ws_kernel: two consumer warpgroups, each its own
# partition, and a TMA producer warp; M = 128, W = 8 only), "M,N,W,S,pingpong" the same with the
# two warpgroups taking turns to issue their MMAs. (A "ws_rows" mode, each warpgroup over its own
# rows' key tiles only, was no faster on the H200 (2026-12-06, U(32, 1024) 0.381 vs 0.388 ms
# forward, bench/results/attention_20261206-0250_NVIDIA_H200.md) and was removed, with the dQ
# kernel's.)
FWD_MODES = ("ws", "pingpong", "persistent")
DEFAULT_CONFIG = (128, 128, 8, 2)
# Default mode: persistent since 2026-12-06 (tenth session). Warp-specialized ("ws") was 4-14%
# faster than the plain kernel on the H200 and the same bits (bench/results/
# fwd_variants_20261204_H200.txt; ping-pong turns were not faster); the persistent forward is the
# same consumers with one program per SM and the same bits (GPU test). Its forward was faster
# before, but its fwd+bwd looked no faster while providers were timed one after the other on a
# GPU that slows as it heats; timed in alternating rounds with an A/A control (H100, bench/results/
# attention_20261206-0701_NVIDIA_H100_80GB_HBM3.md: two timings of the ws default differ by
# 0.2-0.9%), it is 1.0-2.5% faster fwd+bwd on equal 2k, U(128, 4096), lognormal 1k (D = 64, 128,
# GQA 32/8). Doc tiles (FLAMIA_TILES=doc), which the persistent forward does not take, keep "ws".
DEFAULT_MODE = "persistent"
DOC_TILES_MODE = "ws"
# Short documents (kernels.attention.fwd_short_docs: every document of the call at most
# SHORT_DOCS_MAX_SEQLEN tokens, D = 64 or 128): 64-wide key tiles in the persistent forward. A
# 128-row tile of such documents is a few key tiles, mostly masked ones at document boundaries and
# diagonals: 64-wide key tiles halve the masked area, and the persistent programs hide each
# tile's Q load and O store behind the previous tile's steps. H100, 2026-12-06
# (bench/results/fwd_variants_20261206_H100.txt): U(32, 1024) forward 0.306 vs 0.388 ms (64-wide
# tiles alone 0.352, persistent alone 0.375 on the H200), equal 2k 0.627 vs 0.601 and one
# document 2.18 vs 1.98 (hence the threshold). D = 64 (H100, 2026-12-06,
# bench/results/fwd_variants_d64_20261206_H100.txt): U(32, 1024) 0.247 vs 0.314 ms.
SHORT_DOCS_CONFIG = (128, 64, 8, 2)
SHORT_DOCS_MODE = "persistent"
SHORT_DOCS_MAX_SEQLEN = 1024
SHORT_DOCS_HEAD_DIMS = (64, 128)
# Ring slots the persistent forward fits in shared memory with its Q and O tiles, per head dim
# (compiled for sm_90 with triton 3.6, 128-wide key tiles: D = 64 takes 99 / 132 / 164 KB with
# 2 / 3 / 4 slots; D = 128 with 3 slots 263 KB, above the 227 KB a program may have). Checked at
# the launch, where D is known.
PERSISTENT_MAX_STAGES = {64: 4, 128: 2}


def _fwd_setting(short_docs: bool = False, doc_tiles: bool = False
                 ) -> tuple[tuple[int, int, int, int], str]:
    """The forward's (tile config, mode): FLAMIA_GLUON_FWD when set (sweeps; it wins), else the
    short-document setting, the doc-tile mode or the default."""
    text = os.environ.get("FLAMIA_GLUON_FWD")
    if not text:
        if short_docs:
            return SHORT_DOCS_CONFIG, SHORT_DOCS_MODE
        return DEFAULT_CONFIG, DOC_TILES_MODE if doc_tiles else DEFAULT_MODE
    fields = text.split(",")
    mode = fields[4] if len(fields) == 5 and fields[4] in FWD_MODES else ""
    try:
        m, n, w, st = (int(x) for x in (fields[:4] if mode else fields))
    except ValueError:
        raise ValueError(f"FLAMIA_GLUON_FWD={text!r}; accepted: M,N,W,S[,ws|,pingpong|,persistent]"
                         " e.g. 128,128,8,2 or 128,128,8,2,ws") from None
    if m != 16 * w or m not in (64, 128) or n not in (64, 128) or st < 2:
        raise ValueError(f"FLAMIA_GLUON_FWD={text!r}: needs M = 16 * W, M and N in (64, 128), "
                         "S >= 2")
    if mode and (m, w) != (128, 8):
        raise ValueError(f"FLAMIA_GLUON_FWD={text!r}: the warp-specialized forward needs M = 128, "
                         "W = 8 (two consumer warpgroups of 64 rows)")
    return (m, n, w, st), mode


def config(short_docs: bool = False) -> tuple[int, int, int, int]:
    """(BLOCK_M, BLOCK_N, warps, ring slots) of the forward; read at every launch and by the
    batch plan (through kernels.attention.fwd_blocks). short_docs: the call's documents are
    short (kernels.attention.fwd_short_docs)."""
    return _fwd_setting(short_docs)[0]


def fwd_mode(short_docs: bool = False, doc_tiles: bool = False) -> str:
    """"" (the plain forward), "ws" or "pingpong" (_attn_fwd_hopper_ws_kernel without / with
    turns) or "persistent" (_attn_fwd_hopper_persistent_kernel), from FLAMIA_GLUON_FWD's fifth
    field or, unset, the default, the short-document or the doc-tile mode."""
    return _fwd_setting(short_docs, doc_tiles)[1]


@gluon.jit
def _issue_tile(desc, smem, bars, n, i, hi, col, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
                TOKEN_MAJOR: gl.constexpr = False, key0=0):
    """TMA load of key tile n (the i-th tile this program visits; keys key0 + n * BLOCK_N ..,
    key0: see _query_program) of K or V into ring slot i % STAGES; none past the last visited
    tile hi - 1. TOKEN_MAJOR: desc is over a token-contiguous copy [H * D, T_pad] (tokens along
    columns; the FP8 forward's V)."""
    slot = i % STAGES
    pred = n < hi
    mbarrier.expect(bars.index(slot), desc.block_type.nbytes, pred=pred)
    if TOKEN_MAJOR:
        tma_load(desc, [col, key0 + n * BLOCK_N], bars.index(slot), smem.index(slot), pred=pred)
    else:
        tma_load(desc, [key0 + n * BLOCK_N, col], bars.index(slot), smem.index(slot), pred=pred)


@gluon.jit
def _softmax_step(s, m_i, l_i, c, offs_m, seg_start_m, n, MASKED: gl.constexpr,
                  BLOCK_N: gl.constexpr, s_layout: gl.constexpr, ROW_C: gl.constexpr = False,
                  key0=0):
    """The online-softmax step of kernels.attention._fwd_tile on the logits tile s = Q K_n^T:
    masked tiles hide keys before each row's segment start and after the row; the running max
    is an integer (exact power-of-two rescaling). Returns P (fp32), the new max, l and alpha.
    c: the factor of the base-2 logits, one scalar (BF16) or one per row (ROW_C, FP8: sQ times
    the softmax scale). Key tile n holds keys key0 + n * BLOCK_N .. (see _query_program)."""
    if MASKED:
        offs_n = key0 + n * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
        visible = ((gl.expand_dims(offs_n, 0) >= gl.expand_dims(seg_start_m, 1))
                   & (gl.expand_dims(offs_n, 0) <= gl.expand_dims(offs_m, 1)))
        s = gl.where(visible, s, float("-inf"))
    m_new = gl.maximum(m_i, gl.ceil(gl.max(s, 1) * c))
    m_sub = gl.where(m_new == float("-inf"), 0.0, m_new)
    alpha = gl.exp2(m_i - m_sub)
    if ROW_C:
        p = gl.exp2(s * gl.expand_dims(c, 1) - gl.expand_dims(m_sub, 1))
    else:
        p = gl.exp2(s * c - gl.expand_dims(m_sub, 1))
    l_i = l_i * alpha + gl.sum(p, 1)
    return p, m_new, l_i, alpha


@gluon.jit
def _query_program(entry, head, seg_start_ptr, seg_end_ptr, total, H_Q: gl.constexpr,
                   H_KV: gl.constexpr, HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr,
                   BLOCK_N: gl.constexpr, DOC_TILES: gl.constexpr):
    """A query tile of ``head`` (``entry``: the tile's entry of the launch order, >= 0; in a
    grid (Hq, tiles in launch order) head is program_id(0), in the persistent kernels the work
    item's): head, its K/V column, first row, the end of its rows (row_end: rows from there on
    are not its own) and the key tiles it visits, tile n holding keys key0 + n * BLOCK_N .., as
    kernels.attention._query_tile / _key_tile_ranges: [lo, full_lo) and [full_hi, hi) masked,
    [full_lo, full_hi) unmasked. Grid tiles: entry is the tile's index, key0 = 0, row_end =
    total. DOC_TILES (kernels.attention.doc_tiles): entry is the tile's first row, key0 its
    segment's start, row_end its segment's end. Scalars only, so that any partition can compute
    them."""
    kv_col = (head // (H_Q // H_KV)) * HEAD_DIM
    if DOC_TILES:
        start_m = entry
        row_end = gl.load(seg_end_ptr + entry)
        key0 = gl.load(seg_start_ptr + entry)
        last_row = gl.minimum(start_m + BLOCK_M, row_end) - 1
        lo = 0
        hi = gl.cdiv(last_row + 1 - key0, BLOCK_N)
        full_lo = 0
        full_hi = gl.minimum((start_m - key0 + 1) // BLOCK_N, hi)
    else:
        start_m = entry * BLOCK_M
        row_end = total
        key0 = 0
        lo, full_lo, full_hi, hi = _rows_key_tiles(
            seg_start_ptr, start_m, gl.minimum(start_m + BLOCK_M, total) - 1, BLOCK_N)
    return head, kv_col, start_m, row_end, key0, lo, full_lo, full_hi, hi


@gluon.jit
def _rows_key_tiles(seg_start_ptr, first, last, BLOCK_N: gl.constexpr):
    """Grid tiles: the key tiles that packed rows first .. last visit (lo, full_lo, full_hi,
    hi, see _query_program): from the one holding the first row's segment start to the last
    row's diagonal, unmasked where every key lies in every row's segment and below its row."""
    lo = gl.load(seg_start_ptr + first) // BLOCK_N
    hi = gl.cdiv(last + 1, BLOCK_N)
    full_lo = gl.minimum(gl.cdiv(gl.load(seg_start_ptr + last), BLOCK_N), hi)
    full_hi = gl.maximum(gl.minimum((first + 1) // BLOCK_N, hi), full_lo)
    return lo, full_lo, full_hi, hi


@gluon.jit
def _query_rows(seg_start_ptr, row0, row_end, total, ROWS: gl.constexpr,
                rows_layout: gl.constexpr):
    """Rows row0 .. row0 + ROWS - 1: their indices, which are the program's (below row_end, see
    _query_program), and their segments' starts."""
    offs_m = row0 + gl.arange(0, ROWS, layout=rows_layout)
    row_ok = offs_m < row_end
    seg_start_m = gl.load(seg_start_ptr + offs_m, mask=row_ok, other=total)
    return offs_m, row_ok, seg_start_m


@gluon.jit
def _kv_ring(k_desc, v_desc, STAGES: gl.constexpr):
    """STAGES shared-memory slots for the tiles of two descriptors (K and V; in the dK/dV kernel
    Q and dO), one initialized mbarrier per slot each."""
    k_smem = gl.allocate_shared_memory(k_desc.dtype, [STAGES] + k_desc.block_type.shape,
                                       k_desc.layout)
    v_smem = gl.allocate_shared_memory(v_desc.dtype, [STAGES] + v_desc.block_type.shape,
                                       v_desc.layout)
    k_bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for st in gl.static_range(STAGES):
        mbarrier.init(k_bars.index(st), count=1)
        mbarrier.init(v_bars.index(st), count=1)
    return k_smem, v_smem, k_bars, v_bars


@gluon.jit
def _mma_turn(anchor, TURN: gl.constexpr, ARRIVE: gl.constexpr):
    """Ping-pong of the two consumer warpgroups of the warp-specialized forward (TURN 1 or 2;
    0: no turns), as FlashAttention-3 schedules them: a warpgroup waits for its turn (bar.sync
    on its hardware barrier, 8 or 9, with 256 threads: completed by the other warpgroup's
    bar.arrive) before issuing its MMAs and hands the turn over (bar.arrive on the other's)
    once they are issued, so that one warpgroup's softmax runs while the other's MMAs do.
    Barriers 8 and 9: Gluon's partitions use the lowest ids. anchor: any int32 scalar (the asm
    statement needs an operand)."""
    if TURN != 0:
        if ARRIVE:
            gl.inline_asm_elementwise("bar.arrive $1, 256; mov.u32 $0, 0;", "=r,r",
                                      [anchor * 0 + (10 - TURN)], dtype=gl.int32, is_pure=False,
                                      pack=1)
        else:
            gl.inline_asm_elementwise("bar.sync $1, 256; mov.u32 $0, 0;", "=r,r",
                                      [anchor * 0 + (7 + TURN)], dtype=gl.int32, is_pure=False,
                                      pack=1)


@gluon.jit
def _fwd_step(acc, p_op, m_i, l_i, q_smem, k_smem, v_smem, k_bars, v_bars, k_empty, v_empty,
              k_desc, v_desc, s_zero, c, offs_m, seg_start_m, n, lo, hi, kv_col, key0,
              MASKED: gl.constexpr, WS: gl.constexpr, TURN: gl.constexpr, BLOCK_N: gl.constexpr,
              STAGES: gl.constexpr, s_layout: gl.constexpr, o_layout: gl.constexpr,
              p_layout: gl.constexpr):
    """Step n (> lo): S_n = Q K_n^T and O += P_{n-1} V_{n-1} issued together; the softmax of S_n
    runs while the tensor cores finish P_{n-1} V_{n-1}; then O is rescaled for step n. WS: a
    producer warp refills the ring; this warpgroup only releases the slots it has read. TURN:
    see _mma_turn."""
    i = n - lo
    slot = i % STAGES
    prev = (i - 1) % STAGES
    if not WS:
        # Refill the ring first: K_{n-1}'s and V_{n-2}'s slots were freed by the previous step
        # in this warpgroup, and the barrier makes them free in every warpgroup. At the start of
        # the step, so that no barrier sits between the two MMA waits below. K runs STAGES tiles
        # ahead of its use, V STAGES - 1 (it is consumed a step later).
        cta_barrier()
        _issue_tile(k_desc, k_smem, k_bars, n - 1 + STAGES, i - 1 + STAGES, hi, kv_col, BLOCK_N,
                    STAGES, False, key0)
        _issue_tile(v_desc, v_smem, v_bars, n - 2 + STAGES, i - 2 + STAGES, hi, kv_col, BLOCK_N,
                    STAGES, False, key0)
    mbarrier.wait(k_bars.index(slot), (i // STAGES) & 1)
    mbarrier.wait(v_bars.index(prev), ((i - 1) // STAGES) & 1)
    _mma_turn(n, TURN, False)
    s = warpgroup_mma(q_smem, k_smem.index(slot).permute((1, 0)), s_zero, use_acc=False,
                      is_async=True)
    acc = warpgroup_mma(p_op, v_smem.index(prev), acc, is_async=True)
    _mma_turn(n, TURN, True)
    # Wait for S_n only (MMA groups complete in order); P_{n-1} V_{n-1} keeps running.
    s = warpgroup_mma_wait(num_outstanding=1, deps=(s, ))
    if WS:
        mbarrier.arrive(k_empty.index(slot))
    p, m_i, l_i, alpha = _softmax_step(s, m_i, l_i, c, offs_m, seg_start_m, n, MASKED, BLOCK_N,
                                       s_layout, False, key0)
    alpha = gl.convert_layout(alpha, gl.SliceLayout(1, o_layout))
    # ptxas schedules this wait right after the row maximum, before the exponentials. Tying it
    # to the row sum (a predicated wgmma.wait_group, p = l >= 0, in one asm statement with l)
    # kept all 64 exponentials beside P V (bench/gluon_report.py) but made the forward 2-6%
    # slower on the H200 (bench/results/fwd_variants_20261203_H200.txt, run 4), so it is not
    # used. P_n becomes an MMA operand only after the wait, as in FlashAttention-3: its
    # registers may be those P_{n-1} occupies in flight.
    acc, p_op = warpgroup_mma_wait(num_outstanding=0, deps=(acc, p_op))
    if WS:
        mbarrier.arrive(v_empty.index(prev))
    p_next = gl.convert_layout(p.to(gl.bfloat16), p_layout)
    acc = acc * gl.expand_dims(alpha, 1)
    return acc, p_next, m_i, l_i


@gluon.jit
def _store_rows(x, smem, desc, out_ptr, row0, col, row_end, STRIDE: gl.constexpr,
                DOC_TILES: gl.constexpr, layout: gl.constexpr):
    """x [ROWS, D] (bf16, ``layout``) into rows row0 .. of a contiguous [T, H, D] tensor seen as
    [T, H * D] (desc over it, out_ptr its base, STRIDE = H * D) at column col: by one TMA store
    through smem (it clips rows past the last token). DOC_TILES: rows from row_end on belong to
    another document's program; a tile reaching there is stored from registers with a row mask
    (_store_rows_masked)."""
    if DOC_TILES:
        if row0 + x.shape[0] > row_end:
            _store_rows_masked(x, out_ptr, row0, col, row_end, STRIDE, layout)
        else:
            _store_rows_tma(x, smem, desc, row0, col)
    else:
        _store_rows_tma(x, smem, desc, row0, col)


@gluon.jit
def _store_rows_tma(x, smem, desc, row0, col):
    smem.store(x)
    fence_async_shared()
    tma_store(desc, [row0, col], smem)
    tma.store_wait(pendings=0)


@gluon.jit
def _store_rows_async(x, smem, desc, row0, col):
    """_store_rows_tma without waiting for the store: the wait comes before smem is written
    again (the partition's warps meet after it, since only the thread that issued the store
    waits for it), or at the end of the kernel."""
    tma.store_wait(pendings=0)
    cta_barrier()  # this partition's warps only (a named barrier)
    smem.store(x)
    fence_async_shared()
    tma_store(desc, [row0, col], smem)


@gluon.jit
def _store_rows_masked(x, out_ptr, row0, col, row_end, STRIDE: gl.constexpr,
                       layout: gl.constexpr):
    """x [ROWS, D] (``layout``) in bf16 into rows row0 .. of a contiguous [T, H, D] tensor seen as
    [T, H * D] (out_ptr its base, STRIDE = H * D) at column col, from registers, the rows from
    row_end on dropped."""
    offs_r = row0 + gl.arange(0, x.shape[0], layout=gl.SliceLayout(1, layout))
    offs_c = col + gl.arange(0, x.shape[1], layout=gl.SliceLayout(0, layout))
    ptrs = (out_ptr + gl.expand_dims(offs_r.to(gl.int64) * STRIDE, 1)
            + gl.expand_dims(offs_c, 0))
    gl.store(ptrs, x.to(gl.bfloat16), mask=gl.expand_dims(offs_r < row_end, 1))


@gluon.jit
def _store_o_lse(acc, m_i, l_i, o_smem, o_desc, lse_ptr, head, stride_lh, offs_m, row_ok, row0,
                 row_end, o_ptr, H_Q: gl.constexpr, HEAD_DIM: gl.constexpr,
                 o_layout: gl.constexpr, DOC_TILES: gl.constexpr, ASYNC: gl.constexpr = False):
    """The forward's epilogue for query rows row0 .. (those below row_end: see _query_program):
    lse2 = m + log2(l), and O = acc / l in bf16 (_store_rows; ASYNC, grid tiles only:
    _store_rows_async)."""
    o = acc / gl.expand_dims(gl.convert_layout(l_i, gl.SliceLayout(1, o_layout)), 1)
    gl.store(lse_ptr + head * stride_lh + offs_m, m_i + gl.log2(l_i), mask=row_ok)
    if ASYNC:
        _store_rows_async(o.to(gl.bfloat16), o_smem, o_desc, row0, head * HEAD_DIM)
    else:
        _store_rows(o.to(gl.bfloat16), o_smem, o_desc, o_ptr, row0, head * HEAD_DIM, row_end,
                    H_Q * HEAD_DIM, DOC_TILES, o_layout)


@gluon.jit
def _drain_ring(bars, empty, count, STAGES: gl.constexpr, second=None, second_empty=None,
                third=None):
    """A warp-specialized consumer with no rows of its own (doc tiles: its rows all lie past its
    document's end) releases each of the ``count`` ring slots it would have read, once the
    producer has filled it: the slot-empty barriers count both consumers' arrivals, so the other
    consumer's steps go on. bars / empty: the ring's full / empty barriers; second /
    second_empty: a second ring's (the forward's V), or None; third: more full barriers of the
    same slots (the dK/dV kernel's lse2/delta tiles), or None."""
    for i in range(count):
        slot = i % STAGES
        mbarrier.wait(bars.index(slot), (i // STAGES) & 1)
        if second is not None:
            mbarrier.wait(second.index(slot), (i // STAGES) & 1)
        if third is not None:
            mbarrier.wait(third.index(slot), (i // STAGES) & 1)
        mbarrier.arrive(empty.index(slot))
        if second_empty is not None:
            mbarrier.arrive(second_empty.index(slot))


@gluon.jit
def _fwd_rows(q_smem, q_bar, k_smem, v_smem, k_bars, v_bars, k_empty, v_empty, k_desc, v_desc,
              o_desc, o_ptr, lse_ptr, seg_start_ptr, stride_lh, total, c, head, kv_col, row0,
              row_end, key0, lo, full_lo, full_hi, hi, ROWS: gl.constexpr,
              BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr, STAGES: gl.constexpr,
              WARPS: gl.constexpr, WS: gl.constexpr, TURN: gl.constexpr, H_Q: gl.constexpr,
              DOC_TILES: gl.constexpr):
    """_fwd_rows_of; with doc tiles, a warp-specialized consumer (no ping-pong turns to keep)
    whose rows all lie past the document's end only releases the ring's slots (_drain_ring)."""
    if DOC_TILES and WS and TURN == 0:
        if row0 >= row_end:
            mbarrier.wait(q_bar, 0)  # its Q half's TMA load lands before the program ends
            _drain_ring(k_bars, k_empty, hi - lo, STAGES, v_bars, v_empty)
        else:
            _fwd_rows_of(q_smem, q_bar, k_smem, v_smem, k_bars, v_bars, k_empty, v_empty, k_desc,
                         v_desc, o_desc, o_ptr, lse_ptr, seg_start_ptr, stride_lh, total, c,
                         head, kv_col, row0, row_end, key0, lo, full_lo, full_hi, hi, ROWS,
                         BLOCK_N, HEAD_DIM, STAGES, WARPS, WS, TURN, H_Q, DOC_TILES)
    else:
        _fwd_rows_of(q_smem, q_bar, k_smem, v_smem, k_bars, v_bars, k_empty, v_empty, k_desc,
                     v_desc, o_desc, o_ptr, lse_ptr, seg_start_ptr, stride_lh, total, c, head,
                     kv_col, row0, row_end, key0, lo, full_lo, full_hi, hi, ROWS, BLOCK_N,
                     HEAD_DIM, STAGES, WARPS, WS, TURN, H_Q, DOC_TILES)


@gluon.jit
def _fwd_rows_of(q_smem, q_bar, k_smem, v_smem, k_bars, v_bars, k_empty, v_empty, k_desc, v_desc,
                 o_desc, o_ptr, lse_ptr, seg_start_ptr, stride_lh, total, c, head, kv_col, row0,
                 row_end, key0, lo, full_lo, full_hi, hi, ROWS: gl.constexpr,
                 BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr, STAGES: gl.constexpr,
                 WARPS: gl.constexpr, WS: gl.constexpr, TURN: gl.constexpr, H_Q: gl.constexpr,
                 DOC_TILES: gl.constexpr, base=0, q_phase=0, q_empty=None, o_smem=None):
    """The forward of query rows row0 .. row0 + ROWS - 1 of ``head`` (WARPS / 4 warpgroups of
    64 rows) over key tiles lo .. hi - 1 of the ring (Q in q_smem once q_bar completes): O
    through q_smem (_store_rows; o_ptr: O's base), lse2 to lse_ptr; row_end, key0, DOC_TILES:
    see _query_program. WS: one partition of the warp-specialized forward (the producer fills
    the ring; the slots are released through k_empty / v_empty), TURN its place in the
    ping-pong (_mma_turn; 0: none). The persistent forward (_attn_fwd_hopper_persistent_kernel)
    runs several tiles through one ring: base counts the ring's tiles before this one (key
    tile n is the ring's tile n - lo + base), q_phase is the phase of q_bar's completion for
    this tile; Q's slot is released through q_empty once the last S = Q K^T has run, and O goes
    out through its own o_smem by a TMA store that the next tile's epilogue waits for
    (_store_rows_async)."""
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[WARPS, 1], instr_shape=[16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[WARPS, 1], instr_shape=[16, HEAD_DIM, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    rows_s: gl.constexpr = gl.SliceLayout(1, s_layout)

    offs_m, row_ok, seg_start_m = _query_rows(seg_start_ptr, row0, row_end, total, ROWS, rows_s)
    m_i = gl.full([ROWS], float("-inf"), gl.float32, layout=rows_s)
    l_i = gl.zeros([ROWS], gl.float32, layout=rows_s)
    acc = gl.zeros([ROWS, HEAD_DIM], gl.float32, layout=o_layout)
    s_zero = gl.zeros([ROWS, BLOCK_N], gl.float32, layout=s_layout)

    # First tile: S and its softmax (O is still 0, nothing to rescale).
    mbarrier.wait(q_bar, q_phase)
    first = base % STAGES
    mbarrier.wait(k_bars.index(first), (base // STAGES) & 1)
    if TURN == 2:  # warpgroup 0 goes first: warpgroup 1 hands it the first turn
        _mma_turn(lo, TURN, True)
    _mma_turn(lo, TURN, False)
    s = warpgroup_mma(q_smem, k_smem.index(first).permute((1, 0)), s_zero, use_acc=False,
                      is_async=True)
    _mma_turn(lo, TURN, True)
    s = warpgroup_mma_wait(num_outstanding=0, deps=(s, ))
    if WS:
        mbarrier.arrive(k_empty.index(first))
    if (lo < full_lo) | (lo >= full_hi):
        p, m_i, l_i, alpha = _softmax_step(s, m_i, l_i, c, offs_m, seg_start_m, lo, True,
                                           BLOCK_N, s_layout, False, key0)
    else:
        p, m_i, l_i, alpha = _softmax_step(s, m_i, l_i, c, offs_m, seg_start_m, lo, False,
                                           BLOCK_N, s_layout, False, key0)
    p_op = gl.convert_layout(p.to(gl.bfloat16), p_layout)

    # Steps lo + 1 .. hi - 1 in three loops (masked boundary tiles, unmasked tiles, masked
    # diagonal tiles): no branch inside a step, where ptxas would wait for the MMAs in flight
    # at the join (SASS, 2026-12-03: the softmax then ran after P V, not beside it). Key tile n
    # is the ring's tile n - ring0.
    ring0 = lo - base
    for n in range(lo + 1, full_lo):
        acc, p_op, m_i, l_i = _fwd_step(
            acc, p_op, m_i, l_i, q_smem, k_smem, v_smem, k_bars, v_bars, k_empty, v_empty,
            k_desc, v_desc, s_zero, c, offs_m, seg_start_m, n, ring0, hi, kv_col, key0, True, WS,
            TURN, BLOCK_N, STAGES, s_layout, o_layout, p_layout)
    for n in range(gl.maximum(lo + 1, full_lo), full_hi):
        acc, p_op, m_i, l_i = _fwd_step(
            acc, p_op, m_i, l_i, q_smem, k_smem, v_smem, k_bars, v_bars, k_empty, v_empty,
            k_desc, v_desc, s_zero, c, offs_m, seg_start_m, n, ring0, hi, kv_col, key0, False, WS,
            TURN, BLOCK_N, STAGES, s_layout, o_layout, p_layout)
    for n in range(gl.maximum(lo + 1, full_hi), hi):
        acc, p_op, m_i, l_i = _fwd_step(
            acc, p_op, m_i, l_i, q_smem, k_smem, v_smem, k_bars, v_bars, k_empty, v_empty,
            k_desc, v_desc, s_zero, c, offs_m, seg_start_m, n, ring0, hi, kv_col, key0, True, WS,
            TURN, BLOCK_N, STAGES, s_layout, o_layout, p_layout)

    if q_empty is not None:  # every S of this tile has run: the producer may load the next Q
        mbarrier.arrive(q_empty)
    last = (hi - 1 - ring0) % STAGES
    mbarrier.wait(v_bars.index(last), ((hi - 1 - ring0) // STAGES) & 1)
    _mma_turn(hi, TURN, False)
    acc = warpgroup_mma(p_op, v_smem.index(last), acc, is_async=True)
    if TURN == 1:  # warpgroup 0's last hand-over; warpgroup 1's would have no taker
        _mma_turn(hi, TURN, True)
    acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, ))
    if q_empty is not None:  # persistent: the next tile's V goes into this slot
        mbarrier.arrive(v_empty.index(last))

    if o_smem is None:
        # Q's slot holds the O tile for the TMA store (same shape, dtype and layout).
        _store_o_lse(acc, m_i, l_i, q_smem, o_desc, lse_ptr, head, stride_lh, offs_m, row_ok,
                     row0, row_end, o_ptr, H_Q, HEAD_DIM, o_layout, DOC_TILES)
    else:
        _store_o_lse(acc, m_i, l_i, o_smem, o_desc, lse_ptr, head, stride_lh, offs_m, row_ok,
                     row0, row_end, o_ptr, H_Q, HEAD_DIM, o_layout, DOC_TILES, True)


@gluon.jit
def _attn_fwd_hopper_kernel(
    q_desc, k_desc, v_desc, o_desc, o_ptr, lse_ptr, seg_start_ptr, seg_end_ptr, order_ptr,
    stride_lh, total, c, H_Q: gl.constexpr, H_KV: gl.constexpr, HEAD_DIM: gl.constexpr,
    BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
    DOC_TILES: gl.constexpr, num_warps: gl.constexpr,
):
    """Grid (Hq, query tiles in launch order). q/k/v/o descriptors over [T, H * D] views; o_ptr:
    O's base (DOC_TILES' partial tiles: _store_rows)."""
    entry = gl.load(order_ptr + gl.program_id(1))
    if DOC_TILES:
        if entry < 0:  # past the last tile
            return
    head, kv_col, start_m, row_end, key0, lo, full_lo, full_hi, hi = _query_program(
        entry, gl.program_id(0), seg_start_ptr, seg_end_ptr, total, H_Q, H_KV, HEAD_DIM, BLOCK_M,
        BLOCK_N, DOC_TILES)
    q_smem = gl.allocate_shared_memory(q_desc.dtype, q_desc.block_type.shape, q_desc.layout)
    q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(q_bar, count=1)
    k_smem, v_smem, k_bars, v_bars = _kv_ring(k_desc, v_desc, STAGES)
    fence_async_shared()

    mbarrier.expect(q_bar, q_desc.block_type.nbytes)
    tma_load(q_desc, [start_m, head * HEAD_DIM], q_bar, q_smem)
    for st in gl.static_range(STAGES):  # K tiles 0 .. STAGES - 1, V tiles 0 .. STAGES - 2
        _issue_tile(k_desc, k_smem, k_bars, lo + st, st, hi, kv_col, BLOCK_N, STAGES, False,
                    key0)
        if st < STAGES - 1:
            _issue_tile(v_desc, v_smem, v_bars, lo + st, st, hi, kv_col, BLOCK_N, STAGES, False,
                        key0)
    _fwd_rows(q_smem, q_bar, k_smem, v_smem, k_bars, v_bars, k_bars, v_bars, k_desc, v_desc,
              o_desc, o_ptr, lse_ptr, seg_start_ptr, stride_lh, total, c, head, kv_col, start_m,
              row_end, key0, lo, full_lo, full_hi, hi, BLOCK_M, BLOCK_N, HEAD_DIM, STAGES,
              num_warps, False, 0, H_Q, DOC_TILES)


# Warp-specialized forward (FLAMIA_GLUON_FWD=128,128,8,S,ws): the 128 query rows of a tile are
# two partitions of one warpgroup each (the default partition and a 4-warp worker), and a 1-warp
# worker issues every TMA load. The consumers no longer meet at a CTA barrier before each refill
# (23% of the stall samples of the plain kernel, bench/results/ncu_gluon_fwd_20261203_H200.txt):
# each releases a ring slot by an mbarrier arrival once its MMAs have read it (slot-empty
# barriers of count 2), and the two warpgroups drift out of phase, so that one's softmax runs
# while the other's MMAs do. Same function as the plain kernel: every row sees the same MMAs and
# the same softmax steps, so O and lse2 are the same bits.
WS_CONSUMER_REGS = 232  # setmaxnreg of the 4-warp consumer worker (the producer keeps 40)
WS_PRODUCER_REGS = 40


@gluon.jit
def _fwd_ws_producer(q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_bars, k_bars, v_bars,
                     k_empty, v_empty, head, kv_col, start_m, key0, lo, hi,
                     HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
                     V_TOKEN_MAJOR: gl.constexpr = False, base=0, q_phase=0, q_empty=None):
    """The TMA producer warp: both halves of the Q tile, then K_n and V_n into slot
    (n - lo) % STAGES once both consumers have released the tile that was there.
    V_TOKEN_MAJOR: v_desc is over V's token-contiguous copy (the FP8 forward). The persistent
    forward: key tile n into the ring's tile n - lo + base, each Q half once its consumer has
    released the previous tile's (q_empty; q_phase: this tile's phase of q_bars)."""
    for h in gl.static_range(2):
        if q_empty is not None:
            mbarrier.wait(q_empty.index(h), q_phase ^ 1)
        mbarrier.expect(q_bars.index(h), q_desc.block_type.nbytes)
        tma_load(q_desc, [start_m + h * q_desc.block_type.shape[0], head * HEAD_DIM],
                 q_bars.index(h), q_smem.index(h))
    for n in range(lo, hi):
        i = n - lo + base
        # A fresh mbarrier counts as having completed the phase before its first, so the first
        # round's waits (parity 1) pass at once.
        phase = ((i // STAGES) & 1) ^ 1
        mbarrier.wait(k_empty.index(i % STAGES), phase)
        _issue_tile(k_desc, k_smem, k_bars, n, i, hi, kv_col, BLOCK_N, STAGES, False, key0)
        mbarrier.wait(v_empty.index(i % STAGES), phase)
        _issue_tile(v_desc, v_smem, v_bars, n, i, hi, kv_col, BLOCK_N, STAGES, V_TOKEN_MAJOR,
                    key0)


@gluon.jit
def _ws_query_buffers(q_desc, k_desc, v_desc, STAGES: gl.constexpr):
    """Shared memory of a warp-specialized query-tile kernel: the two consumers' Q halves with
    their barriers, the K/V ring (_kv_ring) and its slot-empty barriers, which count the arrivals
    of both consumers."""
    q_smem = gl.allocate_shared_memory(q_desc.dtype, [2] + q_desc.block_type.shape,
                                       q_desc.layout)
    q_bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    k_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for h in gl.static_range(2):
        mbarrier.init(q_bars.index(h), count=1)
    for st in gl.static_range(STAGES):
        mbarrier.init(k_empty.index(st), count=2)
        mbarrier.init(v_empty.index(st), count=2)
    k_smem, v_smem, k_bars, v_bars = _kv_ring(k_desc, v_desc, STAGES)
    return q_smem, q_bars, k_smem, v_smem, k_bars, v_bars, k_empty, v_empty


@gluon.jit
def _attn_fwd_hopper_ws_kernel(
    q_desc, k_desc, v_desc, o_desc, o_ptr, lse_ptr, seg_start_ptr, seg_end_ptr, order_ptr,
    stride_lh, total, c, H_Q: gl.constexpr, H_KV: gl.constexpr, HEAD_DIM: gl.constexpr,
    BLOCK_N: gl.constexpr, STAGES: gl.constexpr, PINGPONG: gl.constexpr,
    CONSUMER_REGS: gl.constexpr, PRODUCER_REGS: gl.constexpr, DOC_TILES: gl.constexpr,
    num_warps: gl.constexpr,
):
    """Grid (Hq, 128-row query tiles in launch order); num_warps = 4 (the default partition);
    q/o descriptors with 64-row blocks (one per consumer), k/v with BLOCK_N rows; o_ptr: O's
    base (DOC_TILES' partial tiles: _store_rows)."""
    HALF: gl.constexpr = q_desc.block_type.shape[0]
    entry = gl.load(order_ptr + gl.program_id(1))
    if DOC_TILES:
        if entry < 0:  # past the last tile
            return
    head, kv_col, start_m, row_end, key0, lo, full_lo, full_hi, hi = _query_program(
        entry, gl.program_id(0), seg_start_ptr, seg_end_ptr, total, H_Q, H_KV, HEAD_DIM, 2 * HALF,
        BLOCK_N, DOC_TILES)
    q_smem, q_bars, k_smem, v_smem, k_bars, v_bars, k_empty, v_empty = _ws_query_buffers(
        q_desc, k_desc, v_desc, STAGES)
    fence_async_shared()
    gl.warp_specialize([
        (_fwd_rows, (q_smem.index(0), q_bars.index(0), k_smem, v_smem, k_bars, v_bars, k_empty,
                     v_empty, k_desc, v_desc, o_desc, o_ptr, lse_ptr, seg_start_ptr, stride_lh,
                     total, c, head, kv_col, start_m, row_end, key0, lo, full_lo, full_hi, hi,
                     HALF, BLOCK_N, HEAD_DIM, STAGES, 4, True, 1 if PINGPONG else 0, H_Q,
                     DOC_TILES)),
        (_fwd_rows, (q_smem.index(1), q_bars.index(1), k_smem, v_smem, k_bars, v_bars, k_empty,
                     v_empty, k_desc, v_desc, o_desc, o_ptr, lse_ptr, seg_start_ptr, stride_lh,
                     total, c, head, kv_col, start_m + HALF, row_end, key0, lo, full_lo,
                     full_hi, hi, HALF, BLOCK_N, HEAD_DIM, STAGES, 4, True,
                     2 if PINGPONG else 0, H_Q, DOC_TILES)),
        (_fwd_ws_producer, (q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_bars, k_bars,
                            v_bars, k_empty, v_empty, head, kv_col, start_m, key0, lo, hi,
                            HEAD_DIM, BLOCK_N, STAGES)),
    ], [4, 1], [CONSUMER_REGS, PRODUCER_REGS])


# Persistent forward (FLAMIA_GLUON_FWD=128,128,8,2,persistent): the warp-specialized forward with
# one program per SM that takes the work items (head, query tile) of the launch order from a
# queue (item w: tile order[w // Hq], head w % Hq, the order the grid (Hq, tiles) launches them
# in), so that a tile's prologue and epilogue overlap the previous tile's work: the producer
# loads the next tile's Q as soon as the consumers have run their last S = Q K^T, and its first
# K/V tiles as ring slots free up, while the consumers finish P V and store O through slots of
# their own (the TMA store is waited for by the next tile's epilogue). On short documents a
# 128-row tile is a few key tiles, so a program's fixed cost (launch, barrier setup, Q's load
# latency, the store of O) is a large part of its time. Each tile's MMAs and softmax steps are
# those of the non-persistent kernel, whichever program runs it: the same bits (GPU test). Grid
# tiles only.
#
# Why a queue: dealt statically (round-robin, snake order) the items of the grouped launch order
# gave the longest program 7-14% more steps than the mean (equal 2k: 48%), and the persistent
# forward lost 8-13% to the plain one on U(128, 4096) and lognormal 1k on the H200 (2026-12-05);
# items taken by whichever program is free keep every program within about one item of the
# mean (python -m bench.tile_model, last table).
@gluon.jit
def _work_item(w, order_ptr, seg_start_ptr, total, H_Q: gl.constexpr, H_KV: gl.constexpr,
               HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr):
    """Work item w of a persistent kernel, as _query_program returns it: query tile
    order[w // Hq] of head w % Hq."""
    return _query_program(gl.load(order_ptr + w // H_Q), w % H_Q, seg_start_ptr, seg_start_ptr,
                          total, H_Q, H_KV, HEAD_DIM, BLOCK_M, BLOCK_N, False)


@gluon.jit
def _take_item(queue_ptr, item_bars, t, n_work):
    """The producer of a persistent program takes its t-th work item from the launch's queue
    (queue_ptr[0]: the next item; zero at launch) and hands it to the consumers: stored in this
    program's slot t % 2 of queue_ptr[1 + 2 pid ..], then an arrival on item_bars[t % 2]. -1
    once the queue is empty (each program takes exactly one such item, its last). Slot t % 2 is
    free again: the producer takes item t only after loading item t - 1's Q, which waited for
    the consumers to be done with item t - 2's (_fwd_ws_producer's q_empty), long after they
    read its number."""
    w = gl.atomic_add(queue_ptr, 1)
    w = gl.where(w < n_work, w, -1)
    gl.store(queue_ptr + 1 + 2 * gl.program_id(0) + t % 2, w)
    # The arrival releases the store to the consumers' wait (mbarrier.arrive: release, CTA
    # scope; the wait: acquire).
    mbarrier.arrive(item_bars.index(t % 2))
    return w


@gluon.jit
def _read_item(queue_ptr, item_bars, t):
    """A consumer's t-th work item, as _take_item handed it over (-1: none left)."""
    mbarrier.wait(item_bars.index(t % 2), (t // 2) & 1)
    return gl.load(queue_ptr + 1 + 2 * gl.program_id(0) + t % 2, volatile=True)


@gluon.jit
def _persistent_barriers():
    """A persistent kernel's barriers besides the ring's: q_empty, one per Q half (its
    consumer's arrival once done with the half), and item_bars, one per slot of _take_item."""
    q_empty = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    item_bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for h in gl.static_range(2):
        mbarrier.init(q_empty.index(h), count=1)
        mbarrier.init(item_bars.index(h), count=1)
    return q_empty, item_bars


@gluon.jit
def _fwd_persistent_rows(q_smem, q_bar, q_empty, o_smem, k_smem, v_smem, k_bars, v_bars, k_empty,
                         v_empty, k_desc, v_desc, o_desc, o_ptr, lse_ptr, seg_start_ptr,
                         order_ptr, queue_ptr, item_bars, stride_lh, total, c,
                         HALF_INDEX: gl.constexpr, H_Q: gl.constexpr, H_KV: gl.constexpr,
                         HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr):
    """A consumer of the persistent forward: rows HALF_INDEX * 64 .. of each work item's tile."""
    ROWS: gl.constexpr = o_desc.block_type.shape[0]
    base = 0  # the ring's tiles consumed before this work item
    t = 0  # work items before this one
    w = _read_item(queue_ptr, item_bars, t)
    while w >= 0:
        head, kv_col, start_m, row_end, key0, lo, full_lo, full_hi, hi = _work_item(
            w, order_ptr, seg_start_ptr, total, H_Q, H_KV, HEAD_DIM, 2 * ROWS, BLOCK_N)
        _fwd_rows_of(q_smem, q_bar, k_smem, v_smem, k_bars, v_bars, k_empty, v_empty, k_desc,
                     v_desc, o_desc, o_ptr, lse_ptr, seg_start_ptr, stride_lh, total, c, head,
                     kv_col, start_m + HALF_INDEX * ROWS, row_end, key0, lo, full_lo, full_hi,
                     hi, ROWS, BLOCK_N, HEAD_DIM, STAGES, 4, True, 0, H_Q, False, base, t & 1,
                     q_empty, o_smem)
        base += hi - lo
        t += 1
        w = _read_item(queue_ptr, item_bars, t)
    tma.store_wait(pendings=0)  # the last O tile is out before the program's memory goes


@gluon.jit
def _fwd_persistent_producer(q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_bars, q_empty,
                             k_bars, v_bars, k_empty, v_empty, seg_start_ptr, order_ptr,
                             queue_ptr, item_bars, total, n_work, H_Q: gl.constexpr,
                             H_KV: gl.constexpr, HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr,
                             STAGES: gl.constexpr):
    """The producer warp of the persistent forward: _fwd_ws_producer for each work item it
    takes from the queue."""
    base = 0
    t = 0
    w = _take_item(queue_ptr, item_bars, t, n_work)
    while w >= 0:
        head, kv_col, start_m, _, key0, lo, _, _, hi = _work_item(
            w, order_ptr, seg_start_ptr, total, H_Q, H_KV, HEAD_DIM,
            2 * q_desc.block_type.shape[0], BLOCK_N)
        _fwd_ws_producer(q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_bars, k_bars, v_bars,
                         k_empty, v_empty, head, kv_col, start_m, key0, lo, hi, HEAD_DIM,
                         BLOCK_N, STAGES, False, base, t & 1, q_empty)
        base += hi - lo
        t += 1
        w = _take_item(queue_ptr, item_bars, t, n_work)


@gluon.jit
def _attn_fwd_hopper_persistent_kernel(
    q_desc, k_desc, v_desc, o_desc, o_ptr, lse_ptr, seg_start_ptr, order_ptr, queue_ptr,
    stride_lh, total, c, n_work, H_Q: gl.constexpr, H_KV: gl.constexpr, HEAD_DIM: gl.constexpr,
    BLOCK_N: gl.constexpr, STAGES: gl.constexpr, CONSUMER_REGS: gl.constexpr,
    PRODUCER_REGS: gl.constexpr, num_warps: gl.constexpr,
):
    """Grid (programs,), at most one per SM; n_work = Hq x query tiles; queue_ptr: int32 [1 + 2
    x programs], zero (_take_item); num_warps = 4 (the default partition); q/o descriptors with
    64-row blocks, k/v with BLOCK_N rows. Shared memory at D = 128: Q and O 2 x 16 KB each, the
    ring 2 x 64 KB."""
    q_smem, q_bars, k_smem, v_smem, k_bars, v_bars, k_empty, v_empty = _ws_query_buffers(
        q_desc, k_desc, v_desc, STAGES)
    o_smem = gl.allocate_shared_memory(o_desc.dtype, [2] + o_desc.block_type.shape,
                                       o_desc.layout)
    q_empty, item_bars = _persistent_barriers()
    fence_async_shared()
    gl.warp_specialize([
        (_fwd_persistent_rows, (q_smem.index(0), q_bars.index(0), q_empty.index(0),
                                o_smem.index(0), k_smem, v_smem, k_bars, v_bars, k_empty,
                                v_empty, k_desc, v_desc, o_desc, o_ptr, lse_ptr, seg_start_ptr,
                                order_ptr, queue_ptr, item_bars, stride_lh, total, c, 0, H_Q,
                                H_KV, HEAD_DIM, BLOCK_N, STAGES)),
        (_fwd_persistent_rows, (q_smem.index(1), q_bars.index(1), q_empty.index(1),
                                o_smem.index(1), k_smem, v_smem, k_bars, v_bars, k_empty,
                                v_empty, k_desc, v_desc, o_desc, o_ptr, lse_ptr, seg_start_ptr,
                                order_ptr, queue_ptr, item_bars, stride_lh, total, c, 1, H_Q,
                                H_KV, HEAD_DIM, BLOCK_N, STAGES)),
        (_fwd_persistent_producer, (q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_bars,
                                    q_empty, k_bars, v_bars, k_empty, v_empty, seg_start_ptr,
                                    order_ptr, queue_ptr, item_bars, total, n_work, H_Q, H_KV,
                                    HEAD_DIM, BLOCK_N, STAGES)),
    ], [4, 1], [CONSUMER_REGS, PRODUCER_REGS])


# ------------------------------------------------------------------------------------------
# FP8 forward (mxfp8, nvfp4_fp8): kernels.attention._fwd_tile's IS_FP8 function, warp-specialized
# ------------------------------------------------------------------------------------------

# 128 queries (two consumer warpgroups) x 64 keys: the key tile is the recipe's 64-token group of
# P' (one E8M0 scale per row per 64 keys, recipes.Recipe.inreg_group), 3 ring slots (an FP8
# K tile and V^T tile are 8 KB each at D = 128).
FWD8_CONFIG = (128, 64, 8, 3)
FWD8_CONSUMER_REGS = 232
FWD8_PRODUCER_REGS = 40
# How a step waits for its two MMAs (FLAMIA_GLUON_FWD8, read at every launch): "inflight", the
# BF16 forward's schedule (softmax of S_n while P'_{n-1} V_{n-1} runs), "overlap" (both
# waited for, then the softmax and the O update of the step in one stretch of code). A third
# mode, "pair" (two key tiles per step, their chains side by side), was measured slower on the
# H200 (2026-12-06: U(32, 1024) forward 0.98 vs 0.56 ms, one document 2.92 vs 2.69;
# bench/results/attention_20261206-0250_NVIDIA_H200.md) and removed.
FWD8_MODES = ("inflight", "overlap")


def fwd8_mode() -> str:
    mode = os.environ.get("FLAMIA_GLUON_FWD8", FWD8_MODES[0])
    if mode not in FWD8_MODES:
        raise ValueError(f"FLAMIA_GLUON_FWD8={mode!r}; accepted: {FWD8_MODES}")
    return mode


@triton.constexpr_function
def _column_rows_layout(fields, block, flat):
    """Layout of ``fields`` fp32 values per token (one row each) for ``block`` tokens that gives
    each thread of a 4-warp warpgroup the rows of the tokens S's accumulator layout puts in its
    columns: tokens 2t, 2t + 1 of every 8 (t = lane % 4), 4 * fields contiguous bytes twice per
    8 tokens, the same in every warp and row. flat: as one [fields * block] vector (global
    loads: a 2D [block, fields] layout loaded from global memory compiled to more instructions
    and spills in the FP8 forward, triton 3.6), else [block, fields] (a shared-memory tile)."""
    at = (lambda t, f: [t * fields + f]) if flat else (lambda t, f: [t, f])
    return gl.DistributedLinearLayout(
        reg_bases=([at(0, 1 << b) for b in range(fields.bit_length() - 1)] + [at(1, 0)]
                   + [at(1 << b, 0) for b in range(3, block.bit_length() - 1)]),
        lane_bases=[at(2, 0), at(4, 0)] + [at(0, 0)] * 3, warp_bases=[at(0, 0)] * 2,
        block_bases=[], shape=[fields * block] if flat else [block, fields])


@gluon.jit
def _column_rows(ptr, n, total, other, FIELDS: gl.constexpr, MASKED: gl.constexpr,
                 BLOCK: gl.constexpr):
    """The [T, FIELDS] rows of tile n's BLOCK tokens as [BLOCK, FIELDS] in the layout of S's
    columns (_column_rows_layout: vector loads instead of one scalar load per token and field);
    ``other`` past the last token."""
    flat: gl.constexpr = _column_rows_layout(FIELDS, BLOCK, True)
    offs = FIELDS * n * BLOCK + gl.arange(0, FIELDS * BLOCK, layout=flat)
    if MASKED:
        rows = gl.load(ptr + offs, mask=offs < FIELDS * total, other=other)
    else:
        rows = gl.load(ptr + offs)
    return gl.reshape(rows, [BLOCK, FIELDS])


@gluon.jit
def _key_scales8(skv_ptr, n, total, MASKED: gl.constexpr, BLOCK_N: gl.constexpr,
                 s_layout: gl.constexpr):
    """sK and sV of key tile n from the [T, 2] rows of this program's kv head (1 past the last
    token, as the triton kernel loads them), in the layout of S's columns: each thread loads
    the 16 contiguous bytes (sK, sV of two adjacent keys) that S's accumulator layout puts in
    its columns, 8 vector loads instead of 32 scalar ones; split, it is S's column layout."""
    sk, sv = gl.split(_column_rows(skv_ptr, n, total, 1.0, 2, MASKED, BLOCK_N))
    cols: gl.constexpr = gl.SliceLayout(0, s_layout)
    return gl.convert_layout(sk, cols), gl.convert_layout(sv, cols)


@gluon.jit
def _quantize_p8(p, sv):
    """P' = P sV scaled for E4M3 per row of the tile (kernels.attention._quantize_rows): the row's
    power-of-two scale over its visible entries (masked entries of P are exactly 0) and P' / scale
    in fp32, which the E4M3 cast (saturating, round to nearest even) turns into the MMA operand
    (_p8_operand). P >= 0 and sV > 0, so the row maximum is the row's absolute maximum."""
    pf = p * gl.expand_dims(sv, 0)
    return _scale_rows(pf, pf)


@gluon.jit
def _scale_rows(x, mag):
    """x scaled for E4M3 per row by the E8M0 scale of the row's maximum of ``mag`` (x's absolute
    values, or x itself where it is >= 0), with those scales: the in-register rounding of P' and
    dS' (kernels.attention._quantize_rows)."""
    if INREG_ROW_SCALES:
        exp = e8m0_exponent(gl.max(mag, 1))
    else:  # timing experiment only (quantize.INREG_ROW_SCALES): scale 1, wrong values
        exp = gl.full([x.shape[0]], 0, gl.int32, layout=gl.SliceLayout(1, x.type.layout))
    return x * gl.expand_dims(pow2(-exp), 1), pow2(exp)


@gluon.jit
def _p8_operand(pq, p_layout: gl.constexpr):
    """The E4M3 MMA operand of _quantize_p8's scaled P'. Cast where it is used: an 8-bit operand
    carried across the loop was unpacked into one byte per register and packed again (56 PRMT
    per step in the SASS)."""
    return gl.convert_layout(pq.to(gl.float8e4nv), p_layout)


@gluon.jit
def _fwd8_step(acc, pq, p_scale, m_i, l_i, q_smem, k_smem, vt_smem, k_bars, v_bars, k_empty,
               v_empty, skv_ptr, s_zero, o_zero, c, offs_m, seg_start_m, n, lo, total,
               MASKED: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
               s_layout: gl.constexpr, o_layout: gl.constexpr, p_layout: gl.constexpr,
               OVERLAP: gl.constexpr):
    """Step n (> lo), as _fwd_step: S_n = Q K_n^T and X = P'_{n-1} V_{n-1} issued together (P'
    cast to E4M3 while S_n runs), the softmax and scaling of S_n beside X. X runs from a zero
    accumulator (the triton kernel's per-tile FP8 MMA chain, not a chain over all tiles in the
    tensor core's narrower FP8 accumulation); O = (O + X * scale(P'_{n-1})) * alpha_n in fp32,
    the triton kernel's O * alpha_n + X * scale per tile: alpha and the scales are powers of two,
    so both round once, alike. No MMA is in flight across the loop's back edge: one that was
    (X_{n-1} waited in step n) made ptxas serialize every MMA (C7514)."""
    i = n - lo
    slot = i % STAGES
    prev = (i - 1) % STAGES
    sk, sv = _key_scales8(skv_ptr, n, total, MASKED, BLOCK_N, s_layout)
    mbarrier.wait(k_bars.index(slot), (i // STAGES) & 1)
    mbarrier.wait(v_bars.index(prev), ((i - 1) // STAGES) & 1)
    s = warpgroup_mma(q_smem, k_smem.index(slot).permute((1, 0)), s_zero, use_acc=False,
                      is_async=True)
    x = warpgroup_mma(_p8_operand(pq, p_layout), vt_smem.index(prev).permute((1, 0)), o_zero,
                      use_acc=False, is_async=True)
    if OVERLAP:
        # Both done before the softmax: the O update (128 independent FMAs per thread) and the
        # softmax's dependent chain (two row reductions) share one stretch of code, where
        # ptxas can interleave them; the other warpgroup's MMAs keep the tensor cores busy.
        s, x = warpgroup_mma_wait(num_outstanding=0, deps=(s, x))
        mbarrier.arrive(k_empty.index(slot))
        mbarrier.arrive(v_empty.index(prev))
        acc = acc + x * gl.expand_dims(p_scale, 1)
    else:
        s = warpgroup_mma_wait(num_outstanding=1, deps=(s, ))
        mbarrier.arrive(k_empty.index(slot))
    p, m_i, l_i, alpha = _softmax_step(s * gl.expand_dims(sk, 0), m_i, l_i, c, offs_m,
                                       seg_start_m, n, MASKED, BLOCK_N, s_layout, True)
    pq, scale = _quantize_p8(p, sv)
    rows_o: gl.constexpr = gl.SliceLayout(1, o_layout)
    if not OVERLAP:
        # Only x in deps: the wait's lowering takes 16- and 32-bit registers, not P''s 8-bit
        # ones (triton 3.6); ptxas keeps the operand registers of an MMA in flight until its
        # wait.
        x = warpgroup_mma_wait(num_outstanding=0, deps=(x, ))
        mbarrier.arrive(v_empty.index(prev))
        acc = acc + x * gl.expand_dims(p_scale, 1)
    acc = acc * gl.expand_dims(gl.convert_layout(alpha, rows_o), 1)
    return acc, pq, gl.convert_layout(scale, rows_o), m_i, l_i


@gluon.jit
def _fwd8_rows(q_smem, q_bar, o_smem, k_smem, vt_smem, k_bars, v_bars, k_empty, v_empty, o_desc,
               sq_ptr, skv_ptr, lse_ptr, seg_start_ptr, stride_sqh, stride_lh, total, qk_scale,
               head, row0, lo, full_lo, full_hi, hi, ROWS: gl.constexpr, BLOCK_N: gl.constexpr,
               HEAD_DIM: gl.constexpr, STAGES: gl.constexpr, QK_K: gl.constexpr,
               OVERLAP: gl.constexpr):
    """One consumer warpgroup of the FP8 forward: query rows row0 .. row0 + 63 of ``head``
    (_fwd_rows' structure): O by TMA store through o_smem, lse2 to lse_ptr. QK_K: the MMA's K
    step of S = Q K^T (32 for E4M3 Q and K, 16 for nvfp4_fp8's bf16-held NVFP4 values)."""
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_N, QK_K])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, HEAD_DIM, 32])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=4)
    rows_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    rows_o: gl.constexpr = gl.SliceLayout(1, o_layout)

    offs_m, row_ok, seg_start_m = _query_rows(seg_start_ptr, row0, total, total, ROWS, rows_s)
    # Per-row factor of the base-2 logits: sQ * softmax scale * log2(e) (see _rhs_scaled_dot).
    c = gl.load(sq_ptr + head * stride_sqh + offs_m, mask=row_ok, other=1.0) * qk_scale
    m_i = gl.full([ROWS], float("-inf"), gl.float32, layout=rows_s)
    l_i = gl.zeros([ROWS], gl.float32, layout=rows_s)
    acc = gl.zeros([ROWS, HEAD_DIM], gl.float32, layout=o_layout)
    s_zero = gl.zeros([ROWS, BLOCK_N], gl.float32, layout=s_layout)
    o_zero = gl.zeros([ROWS, HEAD_DIM], gl.float32, layout=o_layout)

    # First tile: S, its softmax and P' (O is still 0).
    sk, sv = _key_scales8(skv_ptr, lo, total, True, BLOCK_N, s_layout)
    mbarrier.wait(q_bar, 0)
    mbarrier.wait(k_bars.index(0), 0)
    s = warpgroup_mma(q_smem, k_smem.index(0).permute((1, 0)), s_zero, use_acc=False,
                      is_async=True)
    s = warpgroup_mma_wait(num_outstanding=0, deps=(s, ))
    mbarrier.arrive(k_empty.index(0))
    s = s * gl.expand_dims(sk, 0)
    if (lo < full_lo) | (lo >= full_hi):
        p, m_i, l_i, alpha = _softmax_step(s, m_i, l_i, c, offs_m, seg_start_m, lo, True,
                                           BLOCK_N, s_layout, True)
    else:
        p, m_i, l_i, alpha = _softmax_step(s, m_i, l_i, c, offs_m, seg_start_m, lo, False,
                                           BLOCK_N, s_layout, True)
    pq, p_scale = _quantize_p8(p, sv)
    p_scale = gl.convert_layout(p_scale, rows_o)

    for n in range(lo + 1, full_lo):
        acc, pq, p_scale, m_i, l_i = _fwd8_step(
            acc, pq, p_scale, m_i, l_i, q_smem, k_smem, vt_smem, k_bars, v_bars, k_empty,
            v_empty, skv_ptr, s_zero, o_zero, c, offs_m, seg_start_m, n, lo, total, True,
            BLOCK_N, STAGES, s_layout, o_layout, p_layout, OVERLAP)
    for n in range(gl.maximum(lo + 1, full_lo), full_hi):
        acc, pq, p_scale, m_i, l_i = _fwd8_step(
            acc, pq, p_scale, m_i, l_i, q_smem, k_smem, vt_smem, k_bars, v_bars, k_empty,
            v_empty, skv_ptr, s_zero, o_zero, c, offs_m, seg_start_m, n, lo, total, False,
            BLOCK_N, STAGES, s_layout, o_layout, p_layout, OVERLAP)
    for n in range(gl.maximum(lo + 1, full_hi), hi):
        acc, pq, p_scale, m_i, l_i = _fwd8_step(
            acc, pq, p_scale, m_i, l_i, q_smem, k_smem, vt_smem, k_bars, v_bars, k_empty,
            v_empty, skv_ptr, s_zero, o_zero, c, offs_m, seg_start_m, n, lo, total, True,
            BLOCK_N, STAGES, s_layout, o_layout, p_layout, OVERLAP)

    last = (hi - 1 - lo) % STAGES
    mbarrier.wait(v_bars.index(last), ((hi - 1 - lo) // STAGES) & 1)
    x = warpgroup_mma(_p8_operand(pq, p_layout), vt_smem.index(last).permute((1, 0)), o_zero,
                      use_acc=False, is_async=True)
    x = warpgroup_mma_wait(num_outstanding=0, deps=(x, ))
    acc = acc + x * gl.expand_dims(p_scale, 1)

    _store_o_lse(acc, m_i, l_i, o_smem, o_desc, lse_ptr, head, stride_lh, offs_m, row_ok, row0,
                 total, lse_ptr, 1, HEAD_DIM, o_layout, False)


@gluon.jit
def _attn_fwd8_hopper_ws_kernel(
    q_desc, k_desc, vt_desc, o_desc, sq_ptr, skv_ptr, lse_ptr, seg_start_ptr, order_ptr,
    stride_sqh, stride_skh, stride_lh, total, c, H_Q: gl.constexpr, H_KV: gl.constexpr,
    HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
    CONSUMER_REGS: gl.constexpr, PRODUCER_REGS: gl.constexpr, OVERLAP: gl.constexpr,
    num_warps: gl.constexpr,
):
    """Grid (Hq, 128-row query tiles in launch order), num_warps = 4 (the default partition).
    q (E4M3, or bf16 for nvfp4_fp8) / o (bf16) descriptors over [T, H * D] with 64-row blocks,
    k over [T, Hkv * D] with BLOCK_N rows, vt over V's token-contiguous copy [Hkv * D, T_pad]
    with [D, BLOCK_N] blocks; sq [Hq, T] and skv [Hkv, T, 2] (sK, sV) per-token scales."""
    HALF: gl.constexpr = q_desc.block_type.shape[0]
    head, kv_col, start_m, _, _, lo, full_lo, full_hi, hi = _query_program(
        gl.load(order_ptr + gl.program_id(1)), gl.program_id(0), seg_start_ptr, seg_start_ptr,
        total, H_Q, H_KV, HEAD_DIM, 2 * HALF, BLOCK_N, False)
    skv_ptr = skv_ptr + (kv_col // HEAD_DIM) * stride_skh
    QK_K: gl.constexpr = 256 // q_desc.dtype.primitive_bitwidth
    q_smem, q_bars, k_smem, vt_smem, k_bars, v_bars, k_empty, v_empty = _ws_query_buffers(
        q_desc, k_desc, vt_desc, STAGES)
    # O's tiles have their own buffers: bf16, where Q's are E4M3
    o_smem = gl.allocate_shared_memory(o_desc.dtype, [2] + o_desc.block_type.shape,
                                       o_desc.layout)
    fence_async_shared()
    gl.warp_specialize([
        (_fwd8_rows, (q_smem.index(0), q_bars.index(0), o_smem.index(0), k_smem, vt_smem, k_bars,
                      v_bars, k_empty, v_empty, o_desc, sq_ptr, skv_ptr, lse_ptr, seg_start_ptr,
                      stride_sqh, stride_lh, total, c, head, start_m, lo, full_lo, full_hi, hi,
                      HALF, BLOCK_N, HEAD_DIM, STAGES, QK_K, OVERLAP)),
        (_fwd8_rows, (q_smem.index(1), q_bars.index(1), o_smem.index(1), k_smem, vt_smem, k_bars,
                      v_bars, k_empty, v_empty, o_desc, sq_ptr, skv_ptr, lse_ptr, seg_start_ptr,
                      stride_sqh, stride_lh, total, c, head, start_m + HALF, lo, full_lo,
                      full_hi, hi, HALF, BLOCK_N, HEAD_DIM, STAGES, QK_K, OVERLAP)),
        (_fwd_ws_producer, (q_desc, k_desc, vt_desc, q_smem, k_smem, vt_smem, q_bars, k_bars,
                            v_bars, k_empty, v_empty, head, kv_col, start_m, 0, lo, hi,
                            HEAD_DIM, BLOCK_N, STAGES, True)),
    ], [4, 1], [CONSUMER_REGS, PRODUCER_REGS])


# ------------------------------------------------------------------------------------------
# Backward: dQ over query tiles (the triton dQ kernel's function: S and dP recomputed per key tile)
# ------------------------------------------------------------------------------------------

# 128 queries x 64 keys on 8 warps (the triton dQ kernel's tiles, so the batch plan is shared):
# S, dP (fp32), dS (bf16) and the dQ accumulator fit in registers; 2 K/V ring slots.
DQ_CONFIG = (128, 64, 8, 2)
DQ_MODES = ("ws", "plain", "persistent")
# The default dQ kernel since 2026-12-06 (eleventh session), on grid tiles: the persistent one,
# whose producer loads the next tile's Q, dO and O (for delta, FLAMIA_DELTA=dq) while the
# consumers finish the current one. Timed in alternating rounds against the warp-specialized
# kernel (both computing delta; H100, bench/results/attention_20261206-0924_*): fwd+bwd 0.8-1.9%
# faster on all five workloads. Doc tiles keep the warp-specialized kernel (the persistent one
# takes grid tiles only).
DQ_DEFAULT_MODE = "persistent"
DQ_DOC_TILES_MODE = "ws"


def dq_mode(doc_tiles: bool = False) -> str:
    """"ws" (_attn_bwd_dq_hopper_ws_kernel), "plain" (_attn_bwd_dq_hopper_kernel) or
    "persistent" (_attn_bwd_dq_hopper_persistent_kernel): FLAMIA_GLUON_DQ, else DQ_DEFAULT_MODE
    (doc tiles: DQ_DOC_TILES_MODE); read at every launch."""
    mode = os.environ.get("FLAMIA_GLUON_DQ") or (DQ_DOC_TILES_MODE if doc_tiles
                                                 else DQ_DEFAULT_MODE)
    if mode not in DQ_MODES:
        raise ValueError(f"FLAMIA_GLUON_DQ={mode!r}; accepted: {DQ_MODES}")
    return mode


@gluon.jit
def _dq_step(dq, q_smem, do_smem, k_smem, v_smem, k_bars, v_bars, kv_empty, k_desc, v_desc,
             s_zero, c, lse, delta, offs_m, seg_start_m, n, lo, hi, kv_col, key0,
             MASKED: gl.constexpr, WS: gl.constexpr, BLOCK_N: gl.constexpr,
             STAGES: gl.constexpr, s_layout: gl.constexpr, ds_layout: gl.constexpr):
    """Step n (keys key0 + n * BLOCK_N .., see _query_program): S = Q K_n^T and dP = dO V_n^T
    issued together; P from S as soon as S is done (while dP runs); dS = P (dP - delta);
    dQ += dS K_n. WS: a producer warp fills the ring; the slot is released (kv_empty) once dQ's
    MMA is done."""
    i = n - lo
    slot = i % STAGES
    if not WS:
        # Refill the ring: K_{n-1} and V_{n-1} were released by the previous step (its dQ MMA
        # waited); the barrier makes that true for every warpgroup.
        cta_barrier()
        _issue_tile(k_desc, k_smem, k_bars, n - 1 + STAGES, i - 1 + STAGES, hi, kv_col, BLOCK_N,
                    STAGES, False, key0)
        _issue_tile(v_desc, v_smem, v_bars, n - 1 + STAGES, i - 1 + STAGES, hi, kv_col, BLOCK_N,
                    STAGES, False, key0)
    phase = (i // STAGES) & 1
    mbarrier.wait(k_bars.index(slot), phase)
    s = warpgroup_mma(q_smem, k_smem.index(slot).permute((1, 0)), s_zero, use_acc=False,
                      is_async=True)
    mbarrier.wait(v_bars.index(slot), phase)
    dp = warpgroup_mma(do_smem, v_smem.index(slot).permute((1, 0)), s_zero, use_acc=False,
                       is_async=True)
    s = warpgroup_mma_wait(num_outstanding=1, deps=(s, ))
    p = gl.exp2(s * c - gl.expand_dims(lse, 1))
    if MASKED:
        offs_n = key0 + n * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
        visible = ((gl.expand_dims(offs_n, 0) >= gl.expand_dims(seg_start_m, 1))
                   & (gl.expand_dims(offs_n, 0) <= gl.expand_dims(offs_m, 1)))
        p = gl.where(visible, p, 0.0)
    dp = warpgroup_mma_wait(num_outstanding=0, deps=(dp, ))
    ds = gl.convert_layout((p * (dp - gl.expand_dims(delta, 1))).to(gl.bfloat16), ds_layout)
    dq = warpgroup_mma(ds, k_smem.index(slot), dq, is_async=True)
    dq = warpgroup_mma_wait(num_outstanding=0, deps=(dq, ds))[0]
    if WS:
        mbarrier.arrive(kv_empty.index(slot))
    return dq


@gluon.jit
def _row_delta(o_smem, do_smem, q_bar, q_phase, delta_ptr, head, stride_lh, row0, row_end,
               ROWS: gl.constexpr, HEAD_DIM: gl.constexpr, WARPS: gl.constexpr,
               rows_layout: gl.constexpr):
    """delta = rowsum(dO * O) of rows row0 .. row0 + ROWS - 1 of ``head`` from the O and dO tiles
    in o_smem and do_smem (loaded by TMA with Q: once q_bar's phase q_phase completes); the
    rows below row_end written to delta_ptr ([Hq, T], stride_lh) for the dK/dV kernel that runs
    next, all returned in rows_layout (rows past row_end: zeros past the last token, another
    document's values with doc tiles; their dQ is not stored). The bits of kernels.attention's
    delta kernel: its layout (the one triton picks there: 16-byte vectors along D, warps over
    rows only), so each row's products are added in the same order whatever WARPS is (checked
    bit for bit on the GPU). Replaces that kernel's pass over O and dO and its launch
    (FLAMIA_DELTA, kernels.attention.delta_mode)."""
    COLS: gl.constexpr = HEAD_DIM // 8
    layout: gl.constexpr = gl.BlockedLayout(size_per_thread=[1, 8],
                                            threads_per_warp=[32 // COLS, COLS],
                                            warps_per_cta=[WARPS, 1], order=[1, 0])
    offs_t = row0 + gl.arange(0, ROWS, layout=gl.SliceLayout(1, layout))
    mbarrier.wait(q_bar, q_phase)
    o = o_smem.load(layout)
    do = do_smem.load(layout)
    delta = gl.sum(o.to(gl.float32) * do.to(gl.float32), axis=1)
    gl.store(delta_ptr + head * stride_lh + offs_t, delta, mask=offs_t < row_end)
    return gl.convert_layout(delta, rows_layout)


@gluon.jit
def _dq_rows(q_smem, do_smem, q_bar, k_smem, v_smem, k_bars, v_bars, kv_empty, k_desc, v_desc,
             dq_desc, dq_ptr, o_smem, lse_ptr, delta_ptr, seg_start_ptr, stride_lh, total, c,
             sm_scale, head, kv_col, row0, row_end, key0, lo, full_lo, full_hi, hi,
             ROWS: gl.constexpr, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr,
             STAGES: gl.constexpr, WARPS: gl.constexpr, WS: gl.constexpr, H_Q: gl.constexpr,
             DOC_TILES: gl.constexpr, FUSE_DELTA: gl.constexpr):
    """_dq_rows_of; with doc tiles, a warp-specialized consumer whose rows all lie past the
    document's end only releases the ring's slots (_drain_ring)."""
    if DOC_TILES and WS:
        if row0 >= row_end:
            mbarrier.wait(q_bar, 0)  # its Q and dO halves land before the program ends
            _drain_ring(k_bars, kv_empty, hi - lo, STAGES, v_bars)
        else:
            _dq_rows_of(q_smem, do_smem, q_bar, k_smem, v_smem, k_bars, v_bars, kv_empty, k_desc,
                        v_desc, dq_desc, dq_ptr, o_smem, lse_ptr, delta_ptr, seg_start_ptr,
                        stride_lh, total, c, sm_scale, head, kv_col, row0, row_end, key0, lo,
                        full_lo, full_hi, hi, ROWS, BLOCK_N, HEAD_DIM, STAGES, WARPS, WS, H_Q,
                        DOC_TILES, FUSE_DELTA)
    else:
        _dq_rows_of(q_smem, do_smem, q_bar, k_smem, v_smem, k_bars, v_bars, kv_empty, k_desc,
                    v_desc, dq_desc, dq_ptr, o_smem, lse_ptr, delta_ptr, seg_start_ptr, stride_lh,
                    total, c, sm_scale, head, kv_col, row0, row_end, key0, lo, full_lo, full_hi,
                    hi, ROWS, BLOCK_N, HEAD_DIM, STAGES, WARPS, WS, H_Q, DOC_TILES, FUSE_DELTA)


@gluon.jit
def _dq_rows_of(q_smem, do_smem, q_bar, k_smem, v_smem, k_bars, v_bars, kv_empty, k_desc, v_desc,
                dq_desc, dq_ptr, o_smem, lse_ptr, delta_ptr, seg_start_ptr, stride_lh, total, c,
                sm_scale, head, kv_col, row0, row_end, key0, lo, full_lo, full_hi, hi,
                ROWS: gl.constexpr, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr,
                STAGES: gl.constexpr, WARPS: gl.constexpr, WS: gl.constexpr, H_Q: gl.constexpr,
                DOC_TILES: gl.constexpr, FUSE_DELTA: gl.constexpr, base=0, q_phase=0,
                q_empty=None, dq_smem=None):
    """dQ of query rows row0 .. row0 + ROWS - 1 of ``head`` (WARPS / 4 warpgroups of 64 rows;
    Q and dO in q_smem / do_smem once q_bar completes) over key tiles lo .. hi - 1 of the ring,
    written through q_smem (_store_rows; dq_ptr: dQ's base); row_end, key0, DOC_TILES: see
    _query_program. WS: one consumer partition of the warp-specialized kernel. FUSE_DELTA: delta
    of the rows computed here from O (in o_smem with Q and dO) and dO, and written to delta_ptr
    (_row_delta); else read from delta_ptr. base, q_phase, q_empty, dq_smem: the persistent
    kernel's, as _fwd_rows_of's (dq_smem: O's slot there)."""
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[WARPS, 1], instr_shape=[16, BLOCK_N, 16])
    dq_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[WARPS, 1], instr_shape=[16, HEAD_DIM, 16])
    ds_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=dq_layout, k_width=2)
    rows_s: gl.constexpr = gl.SliceLayout(1, s_layout)

    offs_m, row_ok, seg_start_m = _query_rows(seg_start_ptr, row0, row_end, total, ROWS, rows_s)
    lse = gl.load(lse_ptr + head * stride_lh + offs_m, mask=row_ok, other=0.0)
    if FUSE_DELTA:
        delta = _row_delta(o_smem, do_smem, q_bar, q_phase, delta_ptr, head, stride_lh, row0,
                           row_end, ROWS, HEAD_DIM, WARPS, rows_s)
    else:
        delta = gl.load(delta_ptr + head * stride_lh + offs_m, mask=row_ok, other=0.0)
        mbarrier.wait(q_bar, q_phase)
    dq = gl.zeros([ROWS, HEAD_DIM], gl.float32, layout=dq_layout)
    s_zero = gl.zeros([ROWS, BLOCK_N], gl.float32, layout=s_layout)
    # Three loops, no branch inside a step (see _fwd_step): masked boundary tiles, unmasked
    # tiles, masked diagonal tiles. Key tile n is the ring's tile n - ring0.
    ring0 = lo - base
    for n in range(lo, full_lo):
        dq = _dq_step(dq, q_smem, do_smem, k_smem, v_smem, k_bars, v_bars, kv_empty, k_desc,
                      v_desc, s_zero, c, lse, delta, offs_m, seg_start_m, n, ring0, hi, kv_col,
                      key0, True, WS, BLOCK_N, STAGES, s_layout, ds_layout)
    for n in range(full_lo, full_hi):
        dq = _dq_step(dq, q_smem, do_smem, k_smem, v_smem, k_bars, v_bars, kv_empty, k_desc,
                      v_desc, s_zero, c, lse, delta, offs_m, seg_start_m, n, ring0, hi, kv_col,
                      key0, False, WS, BLOCK_N, STAGES, s_layout, ds_layout)
    for n in range(full_hi, hi):
        dq = _dq_step(dq, q_smem, do_smem, k_smem, v_smem, k_bars, v_bars, kv_empty, k_desc,
                      v_desc, s_zero, c, lse, delta, offs_m, seg_start_m, n, ring0, hi, kv_col,
                      key0, True, WS, BLOCK_N, STAGES, s_layout, ds_layout)

    if dq_smem is None:
        # Q's slot holds the dQ tile for the TMA store (rows past the last token are clipped).
        # Plain kernel: the other warpgroup may still read Q through its last MMA.
        if not WS:
            cta_barrier()
        _store_rows((dq * sm_scale).to(gl.bfloat16), q_smem, dq_desc, dq_ptr, row0,
                    head * HEAD_DIM, row_end, H_Q * HEAD_DIM, DOC_TILES, dq_layout)
    else:
        # Every MMA of this tile has been waited for: the producer may load the next Q and dO.
        mbarrier.arrive(q_empty)
        _store_rows_async((dq * sm_scale).to(gl.bfloat16), dq_smem, dq_desc, row0,
                          head * HEAD_DIM)


@gluon.jit
def _o_rows_smem(do_desc, do_smem, FUSE_DELTA: gl.constexpr):
    """Shared memory for O's rows (FUSE_DELTA: as dO's, which have its type and shape), else
    do_smem as a stand-in that is never read."""
    if FUSE_DELTA:
        return gl.allocate_shared_memory(do_desc.dtype, do_smem.shape, do_desc.layout)
    else:
        return do_smem


@gluon.jit
def _issue_query_rows(q_desc, do_desc, o_desc, q_smem, do_smem, o_smem, bar, row, col,
                      FUSE_DELTA: gl.constexpr):
    """A dQ program's Q and dO rows (and with FUSE_DELTA O's, for _row_delta) by TMA on bar."""
    if FUSE_DELTA:
        mbarrier.expect(bar, q_desc.block_type.nbytes + 2 * do_desc.block_type.nbytes)
        tma_load(o_desc, [row, col], bar, o_smem)
    else:
        mbarrier.expect(bar, q_desc.block_type.nbytes + do_desc.block_type.nbytes)
    tma_load(q_desc, [row, col], bar, q_smem)
    tma_load(do_desc, [row, col], bar, do_smem)


@gluon.jit
def _attn_bwd_dq_hopper_kernel(
    q_desc, k_desc, v_desc, do_desc, dq_desc, o_desc, dq_ptr, lse_ptr, delta_ptr, seg_start_ptr,
    seg_end_ptr, order_ptr, stride_lh, total, c, sm_scale,
    H_Q: gl.constexpr, H_KV: gl.constexpr, HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr,
    BLOCK_N: gl.constexpr, STAGES: gl.constexpr, DOC_TILES: gl.constexpr,
    FUSE_DELTA: gl.constexpr, num_warps: gl.constexpr,
):
    """dQ = sm_scale * sum over key tiles of dS K, dS = P (dP - delta), P = exp2(S c - lse2),
    with the tiles, masking and bf16 rounding of dS of kernels.attention._attn_bwd_dq_kernel.
    Grid (Hq, query tiles in launch order); descriptors over [T, H * D] views; dq_ptr: dQ's
    base (DOC_TILES' partial tiles: _store_rows); FUSE_DELTA: delta from O (o_desc, loaded
    with Q and dO) and dO, written to delta_ptr (_row_delta), else read from it (o_desc
    unused)."""
    entry = gl.load(order_ptr + gl.program_id(1))
    if DOC_TILES:
        if entry < 0:  # past the last tile
            return
    head, kv_col, start_m, row_end, key0, lo, full_lo, full_hi, hi = _query_program(
        entry, gl.program_id(0), seg_start_ptr, seg_end_ptr, total, H_Q, H_KV, HEAD_DIM, BLOCK_M,
        BLOCK_N, DOC_TILES)
    q_smem = gl.allocate_shared_memory(q_desc.dtype, q_desc.block_type.shape, q_desc.layout)
    do_smem = gl.allocate_shared_memory(do_desc.dtype, do_desc.block_type.shape, do_desc.layout)
    o_smem = _o_rows_smem(do_desc, do_smem, FUSE_DELTA)
    q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(q_bar, count=1)
    k_smem, v_smem, k_bars, v_bars = _kv_ring(k_desc, v_desc, STAGES)
    fence_async_shared()

    _issue_query_rows(q_desc, do_desc, o_desc, q_smem, do_smem, o_smem, q_bar, start_m,
                      head * HEAD_DIM, FUSE_DELTA)
    for st in gl.static_range(STAGES - 1):  # the first step loads tile STAGES - 1
        _issue_tile(k_desc, k_smem, k_bars, lo + st, st, hi, kv_col, BLOCK_N, STAGES, False,
                    key0)
        _issue_tile(v_desc, v_smem, v_bars, lo + st, st, hi, kv_col, BLOCK_N, STAGES, False,
                    key0)
    _dq_rows(q_smem, do_smem, q_bar, k_smem, v_smem, k_bars, v_bars, k_bars, k_desc, v_desc,
             dq_desc, dq_ptr, o_smem, lse_ptr, delta_ptr, seg_start_ptr, stride_lh, total, c,
             sm_scale, head, kv_col, start_m, row_end, key0, lo, full_lo, full_hi, hi, BLOCK_M,
             BLOCK_N, HEAD_DIM, STAGES, num_warps, False, H_Q, DOC_TILES, FUSE_DELTA)


# Warp-specialized dQ kernel (FLAMIA_GLUON_DQ=ws; doc tiles' default, see DQ_DEFAULT_MODE): as
# the warp-specialized forward,
# two consumer warpgroups of 64 query rows (own Q/dO halves) and a producer warp for the K/V
# ring; a slot is released (count 2) after a consumer's dQ MMA of that step.
DQ_WS_CONSUMER_REGS = 232
DQ_WS_PRODUCER_REGS = 40


@gluon.jit
def _dq_ws_producer(q_desc, do_desc, o_desc, k_desc, v_desc, q_smem, do_smem, o_smem, q_bars,
                    k_smem, v_smem, k_bars, v_bars, kv_empty, head, kv_col, start_m, key0, lo,
                    hi, HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
                    FUSE_DELTA: gl.constexpr, base=0, q_phase=0, q_empty=None):
    """The TMA producer warp: each consumer's Q and dO halves (FUSE_DELTA: and O's), then K_n
    and V_n into slot
    (n - lo) % STAGES once both consumers have released it. base, q_phase, q_empty: the
    persistent kernel's, as _fwd_ws_producer's."""
    for h in gl.static_range(2):
        if q_empty is not None:
            mbarrier.wait(q_empty.index(h), q_phase ^ 1)
        row = start_m + h * q_desc.block_type.shape[0]
        _issue_query_rows(q_desc, do_desc, o_desc, q_smem.index(h), do_smem.index(h),
                          o_smem.index(h), q_bars.index(h), row, head * HEAD_DIM, FUSE_DELTA)
    for n in range(lo, hi):
        i = n - lo + base
        # A fresh mbarrier counts as having completed the phase before its first: the first
        # round's waits (parity 1) pass at once.
        mbarrier.wait(kv_empty.index(i % STAGES), ((i // STAGES) & 1) ^ 1)
        _issue_tile(k_desc, k_smem, k_bars, n, i, hi, kv_col, BLOCK_N, STAGES, False, key0)
        _issue_tile(v_desc, v_smem, v_bars, n, i, hi, kv_col, BLOCK_N, STAGES, False, key0)


@gluon.jit
def _attn_bwd_dq_hopper_ws_kernel(
    q_desc, k_desc, v_desc, do_desc, dq_desc, o_desc, dq_ptr, lse_ptr, delta_ptr, seg_start_ptr,
    seg_end_ptr, order_ptr, stride_lh, total, c, sm_scale, H_Q: gl.constexpr,
    H_KV: gl.constexpr, HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
    CONSUMER_REGS: gl.constexpr, PRODUCER_REGS: gl.constexpr, DOC_TILES: gl.constexpr,
    FUSE_DELTA: gl.constexpr, num_warps: gl.constexpr,
):
    """_attn_bwd_dq_hopper_kernel's function with warp specialization; grid (Hq, 128-row query
    tiles in launch order), num_warps = 4 (the default partition); q/do/dq/o descriptors with
    64-row blocks (one per consumer), k/v with BLOCK_N rows."""
    HALF: gl.constexpr = q_desc.block_type.shape[0]
    entry = gl.load(order_ptr + gl.program_id(1))
    if DOC_TILES:
        if entry < 0:  # past the last tile
            return
    head, kv_col, start_m, row_end, key0, lo, full_lo, full_hi, hi = _query_program(
        entry, gl.program_id(0), seg_start_ptr, seg_end_ptr, total, H_Q, H_KV, HEAD_DIM, 2 * HALF,
        BLOCK_N, DOC_TILES)
    q_smem = gl.allocate_shared_memory(q_desc.dtype, [2] + q_desc.block_type.shape,
                                       q_desc.layout)
    do_smem = gl.allocate_shared_memory(do_desc.dtype, [2] + do_desc.block_type.shape,
                                        do_desc.layout)
    o_smem = _o_rows_smem(do_desc, do_smem, FUSE_DELTA)
    q_bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    kv_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for h in gl.static_range(2):
        mbarrier.init(q_bars.index(h), count=1)
    for st in gl.static_range(STAGES):
        mbarrier.init(kv_empty.index(st), count=2)
    k_smem, v_smem, k_bars, v_bars = _kv_ring(k_desc, v_desc, STAGES)
    fence_async_shared()
    gl.warp_specialize([
        (_dq_rows, (q_smem.index(0), do_smem.index(0), q_bars.index(0), k_smem, v_smem, k_bars,
                    v_bars, kv_empty, k_desc, v_desc, dq_desc, dq_ptr, o_smem.index(0), lse_ptr,
                    delta_ptr, seg_start_ptr, stride_lh, total, c, sm_scale, head, kv_col,
                    start_m, row_end, key0, lo, full_lo, full_hi, hi, HALF, BLOCK_N, HEAD_DIM,
                    STAGES, 4, True, H_Q, DOC_TILES, FUSE_DELTA)),
        (_dq_rows, (q_smem.index(1), do_smem.index(1), q_bars.index(1), k_smem, v_smem, k_bars,
                    v_bars, kv_empty, k_desc, v_desc, dq_desc, dq_ptr, o_smem.index(1), lse_ptr,
                    delta_ptr, seg_start_ptr, stride_lh, total, c, sm_scale, head, kv_col,
                    start_m + HALF, row_end, key0, lo, full_lo, full_hi, hi, HALF, BLOCK_N,
                    HEAD_DIM, STAGES, 4, True, H_Q, DOC_TILES, FUSE_DELTA)),
        (_dq_ws_producer, (q_desc, do_desc, o_desc, k_desc, v_desc, q_smem, do_smem, o_smem,
                           q_bars, k_smem, v_smem, k_bars, v_bars, kv_empty, head, kv_col,
                           start_m, key0, lo, hi, HEAD_DIM, BLOCK_N, STAGES, FUSE_DELTA)),
    ], [4, 1], [CONSUMER_REGS, PRODUCER_REGS])


# Persistent dQ kernel (FLAMIA_GLUON_DQ=persistent): the warp-specialized dQ kernel with one
# program per SM taking the work items in turn, as the persistent forward does (its comment
# above _work_item): Q and dO of the next tile load once both consumers have waited for their
# last MMA of the tile, dQ goes out through slots of its own. The same bits as the other dQ
# kernels (GPU test). Grid tiles only.
@gluon.jit
def _dq_persistent_rows(q_smem, do_smem, q_bar, q_empty, dq_smem, k_smem, v_smem, k_bars, v_bars,
                        kv_empty, k_desc, v_desc, dq_desc, dq_ptr, o_smem, lse_ptr, delta_ptr,
                        seg_start_ptr, order_ptr, queue_ptr, item_bars, stride_lh, total, c,
                        sm_scale, HALF_INDEX: gl.constexpr, H_Q: gl.constexpr,
                        H_KV: gl.constexpr, HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr,
                        STAGES: gl.constexpr, FUSE_DELTA: gl.constexpr):
    """A consumer of the persistent dQ kernel: rows HALF_INDEX * 64 .. of each work item's
    tile."""
    ROWS: gl.constexpr = dq_desc.block_type.shape[0]
    base = 0  # the ring's tiles consumed before this work item
    t = 0  # work items before this one
    w = _read_item(queue_ptr, item_bars, t)
    while w >= 0:
        head, kv_col, start_m, row_end, key0, lo, full_lo, full_hi, hi = _work_item(
            w, order_ptr, seg_start_ptr, total, H_Q, H_KV, HEAD_DIM, 2 * ROWS, BLOCK_N)
        _dq_rows_of(q_smem, do_smem, q_bar, k_smem, v_smem, k_bars, v_bars, kv_empty, k_desc,
                    v_desc, dq_desc, dq_ptr, o_smem, lse_ptr, delta_ptr, seg_start_ptr, stride_lh,
                    total, c, sm_scale, head, kv_col, start_m + HALF_INDEX * ROWS, row_end, key0,
                    lo, full_lo, full_hi, hi, ROWS, BLOCK_N, HEAD_DIM, STAGES, 4, True, H_Q,
                    False, FUSE_DELTA, base, t & 1, q_empty, dq_smem)
        base += hi - lo
        t += 1
        w = _read_item(queue_ptr, item_bars, t)
    tma.store_wait(pendings=0)  # the last dQ tile is out before the program's memory goes


@gluon.jit
def _dq_persistent_producer(q_desc, do_desc, o_desc, k_desc, v_desc, q_smem, do_smem, o_smem,
                            q_bars, q_empty, k_smem, v_smem, k_bars, v_bars, kv_empty,
                            seg_start_ptr, order_ptr, queue_ptr, item_bars, total, n_work,
                            H_Q: gl.constexpr, H_KV: gl.constexpr, HEAD_DIM: gl.constexpr,
                            BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
                            FUSE_DELTA: gl.constexpr):
    """The producer warp of the persistent dQ kernel: _dq_ws_producer for each work item it
    takes from the queue."""
    base = 0
    t = 0
    w = _take_item(queue_ptr, item_bars, t, n_work)
    while w >= 0:
        head, kv_col, start_m, _, key0, lo, _, _, hi = _work_item(
            w, order_ptr, seg_start_ptr, total, H_Q, H_KV, HEAD_DIM,
            2 * q_desc.block_type.shape[0], BLOCK_N)
        _dq_ws_producer(q_desc, do_desc, o_desc, k_desc, v_desc, q_smem, do_smem, o_smem, q_bars,
                        k_smem, v_smem, k_bars, v_bars, kv_empty, head, kv_col, start_m, key0, lo,
                        hi, HEAD_DIM, BLOCK_N, STAGES, FUSE_DELTA, base, t & 1, q_empty)
        base += hi - lo
        t += 1
        w = _take_item(queue_ptr, item_bars, t, n_work)


@gluon.jit
def _attn_bwd_dq_hopper_persistent_kernel(
    q_desc, k_desc, v_desc, do_desc, dq_desc, o_desc, dq_ptr, lse_ptr, delta_ptr, seg_start_ptr,
    order_ptr, queue_ptr, stride_lh, total, c, sm_scale, n_work, H_Q: gl.constexpr,
    H_KV: gl.constexpr, HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
    CONSUMER_REGS: gl.constexpr, PRODUCER_REGS: gl.constexpr, FUSE_DELTA: gl.constexpr,
    num_warps: gl.constexpr,
):
    """Grid (programs,), at most one per SM; n_work = Hq x query tiles; queue_ptr: int32 [1 + 2
    x programs], zero (_take_item); num_warps = 4 (the default partition); q/do/dq/o descriptors
    with 64-row blocks, k/v with BLOCK_N rows. Shared memory at D = 128: Q, dO and dQ (and with
    FUSE_DELTA O) 2 x 16 KB each, the ring 2 x 32 KB."""
    q_smem = gl.allocate_shared_memory(q_desc.dtype, [2] + q_desc.block_type.shape,
                                       q_desc.layout)
    do_smem = gl.allocate_shared_memory(do_desc.dtype, [2] + do_desc.block_type.shape,
                                        do_desc.layout)
    dq_smem = gl.allocate_shared_memory(dq_desc.dtype, [2] + dq_desc.block_type.shape,
                                        dq_desc.layout)
    o_smem = _o_rows_smem(do_desc, do_smem, FUSE_DELTA)
    q_bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    q_empty, item_bars = _persistent_barriers()
    kv_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for h in gl.static_range(2):
        mbarrier.init(q_bars.index(h), count=1)
    for st in gl.static_range(STAGES):
        mbarrier.init(kv_empty.index(st), count=2)
    k_smem, v_smem, k_bars, v_bars = _kv_ring(k_desc, v_desc, STAGES)
    fence_async_shared()
    gl.warp_specialize([
        (_dq_persistent_rows, (q_smem.index(0), do_smem.index(0), q_bars.index(0),
                               q_empty.index(0), dq_smem.index(0), k_smem, v_smem, k_bars,
                               v_bars, kv_empty, k_desc, v_desc, dq_desc, dq_ptr,
                               o_smem.index(0), lse_ptr, delta_ptr, seg_start_ptr, order_ptr,
                               queue_ptr, item_bars, stride_lh, total, c, sm_scale, 0, H_Q,
                               H_KV, HEAD_DIM, BLOCK_N, STAGES, FUSE_DELTA)),
        (_dq_persistent_rows, (q_smem.index(1), do_smem.index(1), q_bars.index(1),
                               q_empty.index(1), dq_smem.index(1), k_smem, v_smem, k_bars,
                               v_bars, kv_empty, k_desc, v_desc, dq_desc, dq_ptr,
                               o_smem.index(1), lse_ptr, delta_ptr, seg_start_ptr, order_ptr,
                               queue_ptr, item_bars, stride_lh, total, c, sm_scale, 1, H_Q,
                               H_KV, HEAD_DIM, BLOCK_N, STAGES, FUSE_DELTA)),
        (_dq_persistent_producer, (q_desc, do_desc, o_desc, k_desc, v_desc, q_smem, do_smem,
                                   o_smem, q_bars, q_empty, k_smem, v_smem, k_bars, v_bars,
                                   kv_empty, seg_start_ptr, order_ptr, queue_ptr, item_bars,
                                   total, n_work, H_Q, H_KV, HEAD_DIM, BLOCK_N, STAGES,
                                   FUSE_DELTA)),
    ], [4, 1], [CONSUMER_REGS, PRODUCER_REGS])


# ------------------------------------------------------------------------------------------
# Backward: dK, dV over key tiles (the triton dK/dV kernel's function, BF16)
# ------------------------------------------------------------------------------------------

# 64 queries x 128 keys on 8 warps (the triton kernel's tiles, so the batch plan is shared): the
# keys are the MMA's M dimension (S^T = K Q^T), one warpgroup per 64 keys; K and V stay in shared
# memory, Q and dO tiles come by TMA through a ring of 2 slots.
# Default: the warp-specialized kernel (dkdv_pipeline), 9-17% faster than the plain one and the
# triton kernel on the H200 (bench/results/dkdv_variants_20261204_H200.txt, run 4); on grid
# tiles its persistent version (dkdv_persistent, since 2026-12-06, eleventh session).
DKDV_CONFIG = (64, 128, 8, 2)
DKDV_DEFER = False


def dkdv_pipeline(fuse_dq: bool = False) -> tuple[int, bool, bool, bool]:
    """(ring slots, DEFER, UNORDERED, WS) of the dK/dV kernel. Default: the warp-specialized
    kernel with DKDV_CONFIG's slots, or the plain kernel where dQ is fused (FLAMIA_DQ=fused,
    which the warp-specialized kernel does not do). FLAMIA_GLUON_DKDV="S,D[,U][,ws|persistent]"
    overrides it (sweeps): D = 1 leaves the dV and dK MMAs running into the next step
    (needs S >= 3); U = 1 makes the fused-dQ mode (FLAMIA_DQ=fused) add dQ in any order
    (run-to-run noise in dQ's last bits: for measuring what the order costs, not for use); ws
    runs the warp-specialized kernel (_attn_bwd_dkdv_hopper_ws_kernel; D = U = 0, no fused dQ),
    persistent its persistent version (dkdv_persistent; WS is then True too)."""
    text = os.environ.get("FLAMIA_GLUON_DKDV")
    if not text:
        return DKDV_CONFIG[3], DKDV_DEFER, False, not fuse_dq
    fields = text.split(",")
    ws = fields[-1] in ("ws", "persistent")
    try:
        stages, defer, *rest = (int(x) for x in (fields[:-1] if ws else fields))
        unordered = rest[0] if rest else 0
        assert len(rest) <= 1
    except (ValueError, AssertionError):
        raise ValueError(f"FLAMIA_GLUON_DKDV={text!r}; accepted: S,D[,U][,ws|persistent] e.g. "
                         "3,1 or 2,0,ws") from None
    if stages < 2 + defer or defer not in (0, 1) or unordered not in (0, 1):
        raise ValueError(f"FLAMIA_GLUON_DKDV={text!r}: needs D, U in (0, 1) and S >= 2 + D")
    if ws and (defer or unordered):
        raise ValueError(f"FLAMIA_GLUON_DKDV={text!r}: the warp-specialized kernel takes D = U = 0")
    return stages, bool(defer), bool(unordered), ws


def dkdv_persistent(doc_tiles: bool = False) -> bool:
    """Whether the warp-specialized dK/dV kernel runs persistent
    (_attn_bwd_dkdv_hopper_persistent_kernel, grid tiles only): FLAMIA_GLUON_DKDV=S,0,persistent
    asks for it, any other setting not; unset, it is the default on grid tiles since 2026-12-06
    (eleventh session: same bits as the plain kernel on the GPU tests; timed in 8 alternating
    rounds against the warp-specialized one, H100, bench/results/attention_20261206-0941_*:
    backward 2.4-3.9% and fwd+bwd 1.5-2.1% faster on all five workloads)."""
    text = os.environ.get("FLAMIA_GLUON_DKDV")
    if not text:
        return not doc_tiles
    return text.split(",")[-1] == "persistent"


LSE_MODES = ("load", "tma")


def dkdv_lse_mode() -> str:
    """How the warp-specialized BF16 dK/dV kernel's consumers get each query tile's lse2 and
    delta: "tma" (default: the producer loads them by TMA with the tile's Q and dO, a step or
    more ahead) or "load" (global loads at the top of each step, before its first MMA can be
    issued; the same values): FLAMIA_GLUON_DKDV_LSE, read at every launch. "tma" needs T a
    multiple of 4 (16-byte rows of [Hq, T]) and grid tiles; other launches load them. Measured
    2026-12-05 (H100, one process, bench/results/attention_20261205-1449_*): dK/dV kernel one
    document 3.47 vs 3.97 ms, lognormal 1k 1.16 vs 1.32 ms. With doc tiles the "tma" kernel
    stopped on an illegal instruction (GPU test of 2026-12-05, not yet understood): doc tiles
    load them."""
    mode = os.environ.get("FLAMIA_GLUON_DKDV_LSE", "tma")
    if mode not in LSE_MODES:
        raise ValueError(f"FLAMIA_GLUON_DKDV_LSE={mode!r}; accepted: {LSE_MODES}")
    return mode


@gluon.jit
def _pair_coords(j, nq, lo, head0, BLOCK_M: gl.constexpr, query0=0):
    """(query head, first token) of the j-th (query head, query tile) pair a dK/dV program
    visits: heads from head0 outer, tiles lo .. lo + nq - 1 inner (tile m's first row:
    query0 + m * BLOCK_M, see _key_program)."""
    g = j // nq
    return head0 + g, query0 + (lo + j - g * nq) * BLOCK_M


@gluon.jit
def _issue_query_tile(q_desc, do_desc, q_smem, do_smem, q_bars, do_bars, j, count, nq, lo, head0,
                      HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, STAGES: gl.constexpr,
                      query0=0, ring0=0):
    """TMA loads of Q and dO for the j-th pair the program visits (_pair_coords) into ring slot
    (ring0 + j) % STAGES (ring0: the persistent kernel's pairs of earlier work items); none
    from j = count on."""
    slot = (ring0 + j) % STAGES
    pred = j < count
    head, row = _pair_coords(j, nq, lo, head0, BLOCK_M, query0)
    col = head * HEAD_DIM
    mbarrier.expect(q_bars.index(slot), q_desc.block_type.nbytes, pred=pred)
    tma_load(q_desc, [row, col], q_bars.index(slot), q_smem.index(slot), pred=pred)
    mbarrier.expect(do_bars.index(slot), do_desc.block_type.nbytes, pred=pred)
    tma_load(do_desc, [row, col], do_bars.index(slot), do_smem.index(slot), pred=pred)


@gluon.jit
def _dq_add(dq, dqa_ptr, sem_ptr, seg_start_ptr, m, head, tile, n_qtiles, total,
            HEAD_DIM: gl.constexpr, H_Q: gl.constexpr, BLOCK_M: gl.constexpr,
            BLOCK_N: gl.constexpr, ORDERED: gl.constexpr, dq_layout: gl.constexpr):
    """dQ[query tile m of ``head``] += dq (fp32 [T, Hq, D] in memory). ORDERED: in increasing
    key-tile order (kernels.attention._ordered_dq_add: wait while the query tile's counter is
    below this key tile's rank, add, release), so that dQ is the same bits on every run;
    else in whatever order the programs reach it (run-to-run noise in the last bits)."""
    # Rows of 4 consecutive fp32 per thread (one vector atomic each, 8 addresses per thread)
    # instead of the MMA layout's pairs (32 addresses: the registers spill).
    add_layout: gl.constexpr = gl.BlockedLayout(size_per_thread=[1, 4], threads_per_warp=[1, 32],
                                                warps_per_cta=[gl.num_warps(), 1], order=[1, 0])
    dq = gl.convert_layout(dq, add_layout)
    offs_m = m * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, add_layout))
    offs_d = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, add_layout))
    ptrs = (dqa_ptr + gl.expand_dims(offs_m.to(gl.int64) * (H_Q * HEAD_DIM), 1)
            + (head * HEAD_DIM + gl.expand_dims(offs_d, 0)))
    ok = gl.expand_dims(offs_m < total, 1)
    if ORDERED:
        sem = sem_ptr + head * n_qtiles + m
        rank = tile - gl.load(seg_start_ptr + m * BLOCK_M) // BLOCK_N
        count = gl.inline_asm_elementwise(
            "{ .reg .pred p; .reg .b32 n, want; mov.u32 n, %ntid.x; mul.lo.s32 want, $2, n; "
            "WAIT: ld.acquire.gpu.global.b32 $0, [$1]; setp.lt.s32 p, $0, want; @p bra WAIT; "
            "div.s32 $0, $0, n; }",
            "=r,l,r", [sem, rank], dtype=gl.int32, is_pure=False, pack=1)
        ok = ok & (count == rank)  # the adds depend on the value read: issued after the wait
        gl.atomic_add(ptrs, dq, mask=ok, sem="relaxed")
        gl.inline_asm_elementwise(
            "{ mov.u32 $0, 0; red.release.gpu.global.add.s32 [$1], 1; }",
            "=r,l", [sem], dtype=gl.int32, is_pure=False, pack=1)
    else:
        gl.atomic_add(ptrs, dq, mask=ok, sem="relaxed")


@gluon.jit
def _dkdv_step(dk, dv, pt_op, dst, k_smem, v_smem, q_smem, do_smem, ds_smem, q_bars, do_bars,
               r_bars, q_desc, do_desc, lse_src, delta_src, dqa_ptr, sem_ptr, seg_start_ptr,
               s_zero, c, rc, offs_n, seg_end_n, m, i, count, nq, lo, head0, head, tile,
               n_qtiles, stride_lh, total, qdo_empty, query0, MASKED: gl.constexpr,
               HEAD_DIM: gl.constexpr, H_Q: gl.constexpr, BLOCK_M: gl.constexpr,
               BLOCK_N: gl.constexpr, STAGES: gl.constexpr, DEFER: gl.constexpr,
               FUSE_DQ: gl.constexpr, ORDERED: gl.constexpr, WS: gl.constexpr,
               LSE_TMA: gl.constexpr, s_layout: gl.constexpr, op_layout: gl.constexpr,
               dq_layout: gl.constexpr):
    """Query tile m of query head ``head`` (the i-th pair visited): S^T = K Q^T and
    dP^T = V dO^T issued together; P^T from S^T as soon as it is done, dV += P^T dO issued while
    dP^T runs; dS^T = P^T (dP^T - delta); dK += dS^T Q. DEFER: the dV and dK MMAs are left
    running into the next step (its first wait retires them, so they overlap its S^T and dP^T
    MMAs); their register operands P^T, dS^T are carried until then. FUSE_DQ: also
    dQ += dS K_n through shared memory (dS^T stored once, read by the dQ MMA), added into the
    fp32 dQ in memory (_dq_add), instead of a dQ kernel that recomputes S and dP. WS: a
    producer warp fills the ring; the slot is released (qdo_empty) once this step's MMAs are
    done (neither DEFER nor FUSE_DQ). lse_src, delta_src: lse2 and delta [Hq, T] in global
    memory, loaded here, or (LSE_TMA, WS only) their rings of [1, BLOCK_M] tiles in shared
    memory, which the producer fills by TMA with the pair's Q and dO (r_bars). Query tile m's
    first row: query0 + m * BLOCK_M (see _key_program)."""
    slot = i % STAGES
    if not WS:
        # Refill the ring with the pair PREFETCH steps ahead, into the slot of pair i - 1
        # (DEFER: i - 2), whose MMAs have been waited for by then; the barrier makes that true
        # for both warpgroups.
        PREFETCH: gl.constexpr = STAGES - 2 if DEFER else STAGES - 1
        cta_barrier()
        _issue_query_tile(q_desc, do_desc, q_smem, do_smem, q_bars, do_bars, i + PREFETCH,
                          count, nq, lo, head0, HEAD_DIM, BLOCK_M, STAGES, query0)
    offs_m = query0 + m * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(0, s_layout))
    if LSE_TMA:  # loaded ahead by the producer: no global-load latency before the first MMA
        mbarrier.wait(r_bars.index(slot), (i // STAGES) & 1)
        cols: gl.constexpr = gl.SliceLayout(0, s_layout)
        lse = lse_src.index(slot).reshape([BLOCK_M]).load(cols)
        delta = delta_src.index(slot).reshape([BLOCK_M]).load(cols)
    else:
        row_ok = offs_m < total
        lse = gl.load(lse_src + head * stride_lh + offs_m, mask=row_ok, other=0.0)
        delta = gl.load(delta_src + head * stride_lh + offs_m, mask=row_ok, other=0.0)
    phase = (i // STAGES) & 1
    mbarrier.wait(q_bars.index(slot), phase)
    # S^T - lse2 / c from an accumulator holding -lse2 / c, so that lse's registers are free
    # once the MMA is issued (ptxas otherwise spills, bench/gluon_report.py); P^T =
    # exp2(c (S^T - lse2 / c)) (the triton kernel: exp2(c S^T - lse2), the same to a few fp32
    # ulps of the exponent). Likewise dP^T - delta from an accumulator holding -delta.
    st = warpgroup_mma(k_smem, q_smem.index(slot).permute((1, 0)),
                       s_zero - gl.expand_dims(lse * rc, 0), is_async=True)
    if DEFER:
        # Retire the previous step's dV and dK MMAs (groups complete in order; S^T keeps
        # running) before dP^T's registers are taken: their operands' registers are then free.
        dk, dv, pt_op, dst = warpgroup_mma_wait(num_outstanding=1, deps=(dk, dv, pt_op, dst))
    mbarrier.wait(do_bars.index(slot), phase)
    dpt = warpgroup_mma(v_smem, do_smem.index(slot).permute((1, 0)),
                        s_zero - gl.expand_dims(delta, 0), is_async=True)
    st = warpgroup_mma_wait(num_outstanding=1, deps=(st, ))
    pt = gl.exp2(st * c)
    if MASKED:  # keys see queries of their own segment from themselves on
        visible = ((gl.expand_dims(offs_m, 0) >= gl.expand_dims(offs_n, 1))
                   & (gl.expand_dims(offs_m, 0) < gl.expand_dims(seg_end_n, 1)))
        pt = gl.where(visible, pt, 0.0)
    pt_op = gl.convert_layout(pt.to(gl.bfloat16), op_layout)
    dv = warpgroup_mma(pt_op, do_smem.index(slot), dv, is_async=True)
    dpt = warpgroup_mma_wait(num_outstanding=1, deps=(dpt, ))  # dV's MMA keeps running
    ds_t = (pt * dpt).to(gl.bfloat16)  # dpt holds dP^T - delta
    if FUSE_DQ:
        # dQ_m = dS K_n: its A operand spans both warpgroups' keys, so dS^T goes through shared
        # memory, where the dK MMA reads it too (no register operand held while it runs); each
        # warpgroup computes half of dQ's columns (dq_layout: warps [4, 2]).
        ds_smem.store(ds_t)
        fence_async_shared()
        cta_barrier()
        dk = warpgroup_mma(ds_smem, q_smem.index(slot), dk, is_async=True)
        # (zeros made here, not passed in: a loop-invariant zero tile would hold 32 registers)
        dq = warpgroup_mma(ds_smem.permute((1, 0)), k_smem,
                           gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, layout=dq_layout),
                           use_acc=False, is_async=True)
        dk, dv, dq = warpgroup_mma_wait(num_outstanding=0, deps=(dk, dv, dq))
        _dq_add(dq, dqa_ptr, sem_ptr, seg_start_ptr, m, head, tile, n_qtiles, total, HEAD_DIM,
                H_Q, BLOCK_M, BLOCK_N, ORDERED, dq_layout)
    else:
        dst = gl.convert_layout(ds_t, op_layout)
        dk = warpgroup_mma(dst, q_smem.index(slot), dk, is_async=True)
    # DEFER: a wait that waits for nothing (the dV and dK groups stay in flight); it only turns
    # the accumulators back into tensors for the loop to carry.
    dk, dv, pt_op, dst = warpgroup_mma_wait(num_outstanding=2 if DEFER else 0,
                                            deps=(dk, dv, pt_op, dst))
    if WS:
        mbarrier.arrive(qdo_empty.index(slot))
    return dk, dv, pt_op, dst


@gluon.jit
def _key_program(tile, seg_start_ptr, seg_end_ptr, total, H_Q: gl.constexpr,
                 H_KV: gl.constexpr, HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr,
                 BLOCK_N: gl.constexpr, DOC_TILES: gl.constexpr, kv_head=None):
    """The key tile this program owns (grid (Hkv, key tiles in launch order); ``tile``: its
    entry of the launch order, >= 0), its first key, the end of its keys (key_end: keys from
    there on are not its own) and the query tiles that see it, query tile m holding rows
    query0 + m * BLOCK_M .., as kernels.attention._attn_bwd_dkdv_kernel: [lo, full_lo)
    diagonal (masked), [full_lo, full_hi) unmasked, [full_hi, hi) reaching past the first key's
    segment (masked); nq of them per query head, count = G * nq (query head, tile) pairs from
    query head head0 on. Grid tiles: tile is the tile's index, query0 = 0, key_end = total.
    Doc tiles (DOC_TILES, kernels.attention.doc_tiles): tile is the first key, query0 its
    segment's start, key_end its segment's end. Scalars only, so that any partition can
    compute them. kv_head: the persistent kernel's (_key_item), else program_id(0)."""
    if kv_head is None:
        head_kv = gl.program_id(0)
    else:
        head_kv = kv_head
    if DOC_TILES:
        start_n = tile
        key_end = gl.load(seg_end_ptr + tile)
        query0 = gl.load(seg_start_ptr + tile)
    else:
        start_n = tile * BLOCK_N
        key_end = total
        query0 = 0
    last_key = gl.minimum(start_n + BLOCK_N, key_end) - 1
    lo = (start_n - query0) // BLOCK_M
    hi = gl.cdiv(gl.load(seg_end_ptr + last_key) - query0, BLOCK_M)
    full_lo = gl.minimum(gl.cdiv(last_key - query0, BLOCK_M), hi)
    full_hi = gl.maximum(gl.minimum((gl.load(seg_end_ptr + start_n) - query0) // BLOCK_M, hi),
                         full_lo)
    nq = hi - lo
    return (start_n, key_end, query0, head_kv * HEAD_DIM, lo, full_lo, full_hi, hi, nq,
            (H_Q // H_KV) * nq, head_kv * (H_Q // H_KV))


@gluon.jit
def _dkdv_rows(k_smem, v_smem, kv_bar, q_smem, do_smem, ds_smem, q_bars, do_bars, r_bars,
               qdo_empty, q_desc, do_desc, dk_desc, dv_desc, lse_src, delta_src, dqa_ptr,
               sem_ptr, seg_start_ptr, seg_end_ptr, n_qtiles, stride_lh, total, c, sm_scale,
               kv_col, row0, tile, lo, full_lo, full_hi, hi, count, nq, head0, key_end, query0,
               dk_ptr, dv_ptr, ROWS: gl.constexpr, HEAD_DIM: gl.constexpr, H_Q: gl.constexpr,
               G: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
               STAGES: gl.constexpr, DEFER: gl.constexpr, FUSE_DQ: gl.constexpr,
               ORDERED: gl.constexpr, WARPS: gl.constexpr, WS: gl.constexpr,
               LSE_TMA: gl.constexpr, DOC_TILES: gl.constexpr):
    """_dkdv_rows_of; with doc tiles, a warp-specialized consumer whose keys all lie past the
    document's end only releases the ring's slots (_drain_ring)."""
    if DOC_TILES and WS:
        if row0 >= key_end:
            mbarrier.wait(kv_bar, 0)  # its K and V halves land before the program ends
            if LSE_TMA:
                _drain_ring(q_bars, qdo_empty, count, STAGES, do_bars, None, r_bars)
            else:
                _drain_ring(q_bars, qdo_empty, count, STAGES, do_bars)
        else:
            _dkdv_rows_of(k_smem, v_smem, kv_bar, q_smem, do_smem, ds_smem, q_bars, do_bars, r_bars,
                          qdo_empty, q_desc, do_desc, dk_desc, dv_desc, lse_src, delta_src, dqa_ptr,
                          sem_ptr, seg_start_ptr, seg_end_ptr, n_qtiles, stride_lh, total, c,
                          sm_scale, kv_col, row0, tile, lo, full_lo, full_hi, hi, count, nq, head0,
                          key_end, query0, dk_ptr, dv_ptr, ROWS, HEAD_DIM, H_Q, G, BLOCK_M, BLOCK_N,
                          STAGES, DEFER, FUSE_DQ, ORDERED, WARPS, WS, LSE_TMA, DOC_TILES)
    else:
        _dkdv_rows_of(k_smem, v_smem, kv_bar, q_smem, do_smem, ds_smem, q_bars, do_bars, r_bars,
                      qdo_empty, q_desc, do_desc, dk_desc, dv_desc, lse_src, delta_src, dqa_ptr,
                      sem_ptr, seg_start_ptr, seg_end_ptr, n_qtiles, stride_lh, total, c,
                      sm_scale, kv_col, row0, tile, lo, full_lo, full_hi, hi, count, nq, head0,
                      key_end, query0, dk_ptr, dv_ptr, ROWS, HEAD_DIM, H_Q, G, BLOCK_M, BLOCK_N,
                      STAGES, DEFER, FUSE_DQ, ORDERED, WARPS, WS, LSE_TMA, DOC_TILES)


@gluon.jit
def _dkdv_rows_of(k_smem, v_smem, kv_bar, q_smem, do_smem, ds_smem, q_bars, do_bars, r_bars,
                  qdo_empty, q_desc, do_desc, dk_desc, dv_desc, lse_src, delta_src, dqa_ptr,
                  sem_ptr, seg_start_ptr, seg_end_ptr, n_qtiles, stride_lh, total, c, sm_scale,
                  kv_col, row0, tile, lo, full_lo, full_hi, hi, count, nq, head0, key_end, query0,
                  dk_ptr, dv_ptr, ROWS: gl.constexpr, HEAD_DIM: gl.constexpr, H_Q: gl.constexpr,
                  G: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                  STAGES: gl.constexpr, DEFER: gl.constexpr, FUSE_DQ: gl.constexpr,
                  ORDERED: gl.constexpr, WARPS: gl.constexpr, WS: gl.constexpr,
                  LSE_TMA: gl.constexpr, DOC_TILES: gl.constexpr, ring0=0, kv_phase=0,
                  kv_empty=None, dk_smem=None, dv_smem=None):
    """dK, dV of keys row0 .. row0 + ROWS - 1 (K and V in k_smem / v_smem once kv_bar
    completes; WARPS / 4 warpgroups of 64 keys) over the (query head, query tile) pairs of the
    ring, written by TMA stores through k_smem / v_smem. WS: one consumer partition of the
    warp-specialized kernel. lse_src, delta_src, r_bars, LSE_TMA: see _dkdv_step. key_end,
    query0, DOC_TILES: see _key_program; a doc tile's keys from key_end on are another
    document's, and a tile reaching there is stored from registers (dk_ptr, dv_ptr: contiguous
    [T, Hkv, D]) with a row mask. ring0, kv_phase, kv_empty, dk_smem, dv_smem: the persistent
    kernel's (the ring's pairs of earlier work items, kv_bar's phase of this one, the K/V half's
    release, dK's and dV's own slots for the stores, so that K and V can load meanwhile)."""
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[WARPS, 1], instr_shape=[16, BLOCK_M, 16])
    dkv_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[WARPS, 1], instr_shape=[16, HEAD_DIM, 16])
    op_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=dkv_layout, k_width=2)
    dq_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, WARPS // 4],
        instr_shape=[16, HEAD_DIM // (WARPS // 4), 16])

    offs_n = row0 + gl.arange(0, ROWS, layout=gl.SliceLayout(1, s_layout))
    seg_end_n = gl.load(seg_end_ptr + offs_n, mask=offs_n < key_end, other=0)
    dk = gl.zeros([ROWS, HEAD_DIM], gl.float32, layout=dkv_layout)
    dv = gl.zeros([ROWS, HEAD_DIM], gl.float32, layout=dkv_layout)
    pt_op = gl.zeros([ROWS, BLOCK_M], gl.bfloat16, layout=op_layout)
    dst = gl.zeros([ROWS, BLOCK_M], gl.bfloat16, layout=op_layout)
    s_zero = gl.zeros([ROWS, BLOCK_M], gl.float32, layout=s_layout)
    rc = 1.0 / c
    mbarrier.wait(kv_bar, kv_phase)
    for g in range(G):  # the query heads reading this kv head: no atomics
        head = head0 + g
        base = ring0 + g * nq - lo  # pair index of (g, m) is base + m
        # Three loops, no branch inside a step (see _fwd_step).
        for m in range(lo, full_lo):
            dk, dv, pt_op, dst = _dkdv_step(
                dk, dv, pt_op, dst, k_smem, v_smem, q_smem, do_smem, ds_smem, q_bars, do_bars,
                r_bars, q_desc, do_desc, lse_src, delta_src, dqa_ptr, sem_ptr, seg_start_ptr,
                s_zero, c, rc, offs_n, seg_end_n, m, base + m, count, nq, lo, head0, head, tile,
                n_qtiles, stride_lh, total, qdo_empty, query0, True, HEAD_DIM, H_Q, BLOCK_M,
                BLOCK_N, STAGES,
                DEFER, FUSE_DQ, ORDERED, WS, LSE_TMA, s_layout, op_layout, dq_layout)
        for m in range(full_lo, full_hi):
            dk, dv, pt_op, dst = _dkdv_step(
                dk, dv, pt_op, dst, k_smem, v_smem, q_smem, do_smem, ds_smem, q_bars, do_bars,
                r_bars, q_desc, do_desc, lse_src, delta_src, dqa_ptr, sem_ptr, seg_start_ptr,
                s_zero, c, rc, offs_n, seg_end_n, m, base + m, count, nq, lo, head0, head, tile,
                n_qtiles, stride_lh, total, qdo_empty, query0, False, HEAD_DIM, H_Q, BLOCK_M,
                BLOCK_N, STAGES,
                DEFER, FUSE_DQ, ORDERED, WS, LSE_TMA, s_layout, op_layout, dq_layout)
        for m in range(full_hi, hi):
            dk, dv, pt_op, dst = _dkdv_step(
                dk, dv, pt_op, dst, k_smem, v_smem, q_smem, do_smem, ds_smem, q_bars, do_bars,
                r_bars, q_desc, do_desc, lse_src, delta_src, dqa_ptr, sem_ptr, seg_start_ptr,
                s_zero, c, rc, offs_n, seg_end_n, m, base + m, count, nq, lo, head0, head, tile,
                n_qtiles, stride_lh, total, qdo_empty, query0, True, HEAD_DIM, H_Q, BLOCK_M,
                BLOCK_N, STAGES,
                DEFER, FUSE_DQ, ORDERED, WS, LSE_TMA, s_layout, op_layout, dq_layout)
    if DEFER:
        dk, dv, pt_op, dst = warpgroup_mma_wait(num_outstanding=0, deps=(dk, dv, pt_op, dst))
    if kv_empty is not None:
        # Persistent: every MMA that read this K/V half has been waited for (WS steps wait for
        # theirs), so the producer may load the next item's; dK and dV go out through their
        # own slots (rows past the last token clipped).
        mbarrier.arrive(kv_empty)
        _store_dk_dv(dk, dv, sm_scale, dk_smem, dv_smem, dk_desc, dv_desc, row0, kv_col, True)
    else:
        # K's and V's tiles hold dK and dV for the TMA stores (rows past the last token
        # clipped). Plain kernel: both warpgroups' MMAs read all of K and V until their last
        # wait. WS: these slots are this partition's alone.
        if not WS:
            cta_barrier()
        if DOC_TILES:
            if row0 + ROWS > key_end:
                _store_rows_masked(dk * sm_scale, dk_ptr, row0, kv_col, key_end,
                                   (H_Q // G) * HEAD_DIM, dkv_layout)
                _store_rows_masked(dv, dv_ptr, row0, kv_col, key_end, (H_Q // G) * HEAD_DIM,
                                   dkv_layout)
            else:
                _store_dk_dv(dk, dv, sm_scale, k_smem, v_smem, dk_desc, dv_desc, row0, kv_col)
        else:
            _store_dk_dv(dk, dv, sm_scale, k_smem, v_smem, dk_desc, dv_desc, row0, kv_col)


@gluon.jit
def _store_dk_dv(dk, dv, sm_scale, k_smem, v_smem, dk_desc, dv_desc, row0, kv_col,
                 ASYNC: gl.constexpr = False):
    """sm_scale dK and dV in bf16 by TMA stores through K's and V's tiles (or any two tiles of
    their shape). ASYNC (the persistent kernel's own dK/dV slots): not waited for; the wait
    for this partition's previous stores comes first, as in _store_rows_async."""
    if ASYNC:
        tma.store_wait(pendings=0)
        cta_barrier()  # this partition's warps only (a named barrier)
    k_smem.store((dk * sm_scale).to(gl.bfloat16))
    v_smem.store(dv.to(gl.bfloat16))
    fence_async_shared()
    tma_store(dk_desc, [row0, kv_col], k_smem)
    tma_store(dv_desc, [row0, kv_col], v_smem)
    if not ASYNC:
        tma.store_wait(pendings=0)


@gluon.jit
def _attn_bwd_dkdv_hopper_kernel(
    q_desc, k_desc, v_desc, do_desc, dk_desc, dv_desc, lse_ptr, delta_ptr, seg_end_ptr,
    order_ptr, dqa_ptr, sem_ptr, seg_start_ptr, n_qtiles, stride_lh, total, c, sm_scale,
    H_Q: gl.constexpr, H_KV: gl.constexpr, HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr,
    BLOCK_N: gl.constexpr, STAGES: gl.constexpr, DEFER: gl.constexpr, FUSE_DQ: gl.constexpr,
    ORDERED: gl.constexpr, num_warps: gl.constexpr,
):
    """dK = sm_scale * sum of dS^T Q, dV = sum of P^T dO over the query tiles (of every query
    head of the GQA group) that see this key tile, with the tiles, masking and bf16 roundings of
    kernels.attention._attn_bwd_dkdv_kernel (BF16). FUSE_DQ: also adds dS K into dqa (fp32
    [T, Hq, D], unscaled), ORDERED with the counters sem [Hq, n_qtiles] (zeroed by the caller).
    Grid (Hkv, key tiles in launch order); descriptors over [T, H * D] views (Q, dO: BLOCK_M
    rows; K, V, dK, dV: BLOCK_N rows). Grid tiles only (doc tiles: the warp-specialized
    kernel)."""
    PREFETCH: gl.constexpr = STAGES - 2 if DEFER else STAGES - 1
    tile = gl.load(order_ptr + gl.program_id(1))
    start_n, key_end, query0, kv_col, lo, full_lo, full_hi, hi, nq, count, head0 = _key_program(
        tile, seg_start_ptr, seg_end_ptr, total, H_Q, H_KV, HEAD_DIM, BLOCK_M, BLOCK_N, False)

    k_smem = gl.allocate_shared_memory(k_desc.dtype, k_desc.block_type.shape, k_desc.layout)
    v_smem = gl.allocate_shared_memory(v_desc.dtype, v_desc.block_type.shape, v_desc.layout)
    kv_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(kv_bar, count=1)
    q_smem, do_smem, q_bars, do_bars = _kv_ring(q_desc, do_desc, STAGES)
    if FUSE_DQ:
        ds_smem = gl.allocate_shared_memory(
            gl.bfloat16, [BLOCK_N, BLOCK_M],
            gl.NVMMASharedLayout.get_default_for([BLOCK_N, BLOCK_M], gl.bfloat16))
    else:
        ds_smem = k_smem  # unused
    fence_async_shared()

    mbarrier.expect(kv_bar, k_desc.block_type.nbytes + v_desc.block_type.nbytes)
    tma_load(k_desc, [start_n, kv_col], kv_bar, k_smem)
    tma_load(v_desc, [start_n, kv_col], kv_bar, v_smem)
    for j in gl.static_range(PREFETCH):  # the first step loads pair PREFETCH
        _issue_query_tile(q_desc, do_desc, q_smem, do_smem, q_bars, do_bars, j, count, nq, lo,
                          head0, HEAD_DIM, BLOCK_M, STAGES)
    _dkdv_rows(k_smem, v_smem, kv_bar, q_smem, do_smem, ds_smem, q_bars, do_bars, q_bars,
               q_bars, q_desc, do_desc, dk_desc, dv_desc, lse_ptr, delta_ptr, dqa_ptr, sem_ptr,
               seg_start_ptr, seg_end_ptr, n_qtiles, stride_lh, total, c, sm_scale, kv_col,
               start_n, tile, lo, full_lo, full_hi, hi, count, nq, head0, key_end, query0, lse_ptr,
               lse_ptr, BLOCK_N, HEAD_DIM, H_Q, H_Q // H_KV, BLOCK_M, BLOCK_N, STAGES, DEFER,
               FUSE_DQ, ORDERED, num_warps, False, False, False)


# Warp-specialized dK/dV kernel (FLAMIA_GLUON_DKDV=S,0,ws; doc tiles' default, its persistent
# version below grid tiles'): the 128 keys of a tile are two
# consumer partitions of one warpgroup each (64 keys, their own K/V halves), a 1-warp producer
# brings K/V and the ring's Q/dO tiles; a consumer releases a ring slot by an mbarrier arrival
# (count 2) after its step's MMAs, instead of both warpgroups meeting at a CTA barrier before
# each refill. Same MMAs per key row as the plain kernel: the same bits.
DKDV_WS_CONSUMER_REGS = 240  # 2 x 128 x 240 + 128 x 24 <= 65536 registers
DKDV_WS_PRODUCER_REGS = 24


@gluon.jit
def _dkdv_ws_producer(k_desc, v_desc, q_desc, do_desc, lse_desc, delta_desc, k_smem, v_smem,
                      kv_bars, q_smem, do_smem, lse_smem, delta_smem, q_bars, do_bars, r_bars,
                      qdo_empty, start_n, kv_col, count, nq, lo, head0, query0,
                      HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, STAGES: gl.constexpr,
                      LSE_TMA: gl.constexpr, ring0=0, kv_phase=0, kv_empty=None):
    """The TMA producer warp: each consumer's K and V halves, then the (query head, query tile)
    pairs' Q and dO (and with LSE_TMA their lse2 and delta, [1, BLOCK_M] tiles of [Hq, T]: zeros
    past the last token) into slot (ring0 + j) % STAGES once both consumers have released it.
    ring0, kv_phase, kv_empty: the persistent kernel's (a K/V half loads once its consumer is
    done with the previous item's)."""
    for h in gl.static_range(2):
        if kv_empty is not None:
            mbarrier.wait(kv_empty.index(h), kv_phase ^ 1)
        mbarrier.expect(kv_bars.index(h), k_desc.block_type.nbytes + v_desc.block_type.nbytes)
        row = start_n + h * k_desc.block_type.shape[0]
        tma_load(k_desc, [row, kv_col], kv_bars.index(h), k_smem.index(h))
        tma_load(v_desc, [row, kv_col], kv_bars.index(h), v_smem.index(h))
    for j in range(count):
        jj = ring0 + j
        # A fresh mbarrier counts as having completed the phase before its first: the first
        # round's waits (parity 1) pass at once.
        mbarrier.wait(qdo_empty.index(jj % STAGES), ((jj // STAGES) & 1) ^ 1)
        _issue_query_tile(q_desc, do_desc, q_smem, do_smem, q_bars, do_bars, j, count, nq, lo,
                          head0, HEAD_DIM, BLOCK_M, STAGES, query0, ring0)
        if LSE_TMA:
            slot = jj % STAGES
            head, row = _pair_coords(j, nq, lo, head0, BLOCK_M, query0)
            mbarrier.expect(r_bars.index(slot), 2 * lse_desc.block_type.nbytes)
            tma_load(lse_desc, [head, row], r_bars.index(slot), lse_smem.index(slot))
            tma_load(delta_desc, [head, row], r_bars.index(slot), delta_smem.index(slot))


@gluon.jit
def _dkdv_query_ring(q_desc, do_desc, lse_desc, delta_desc, lse_ptr, delta_ptr,
                     STAGES: gl.constexpr, LSE_TMA: gl.constexpr):
    """The warp-specialized dK/dV kernels' ring of (query head, query tile) pairs: Q and dO
    slots and barriers, and lse2/delta: with LSE_TMA their [1, BLOCK_M] slots and barriers
    (r_bars), else the global arrays (the producer loads nothing more; r_bars unused)."""
    q_smem, do_smem, q_bars, do_bars = _kv_ring(q_desc, do_desc, STAGES)
    if LSE_TMA:
        lse_src = _ring(lse_desc, STAGES)
        delta_src = _ring(delta_desc, STAGES)
        r_bars = _barriers(STAGES, 1)
    else:
        lse_src = lse_ptr
        delta_src = delta_ptr
        r_bars = q_bars
    return q_smem, do_smem, q_bars, do_bars, lse_src, delta_src, r_bars


@gluon.jit
def _attn_bwd_dkdv_hopper_ws_kernel(
    q_desc, k_desc, v_desc, do_desc, dk_desc, dv_desc, dk_ptr, dv_ptr, lse_ptr, delta_ptr,
    lse_desc, delta_desc, seg_end_ptr, order_ptr, seg_start_ptr, stride_lh, total, c, sm_scale,
    H_Q: gl.constexpr, H_KV: gl.constexpr, HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr,
    STAGES: gl.constexpr, LSE_TMA: gl.constexpr, CONSUMER_REGS: gl.constexpr,
    PRODUCER_REGS: gl.constexpr, DOC_TILES: gl.constexpr, num_warps: gl.constexpr,
):
    """_attn_bwd_dkdv_hopper_kernel's function (no fused dQ) with warp specialization; grid
    (Hkv, 128-key tiles in launch order), num_warps = 4 (the default partition); k/v/dk/dv
    descriptors with 64-row blocks (one per consumer), q/do with BLOCK_M rows. LSE_TMA: lse2 and
    delta come by TMA (lse_desc, delta_desc over [Hq, T], [1, BLOCK_M] blocks) with each pair's
    Q and dO instead of the consumers' global loads (lse_ptr, delta_ptr): the same values.
    DOC_TILES: see _key_program (dk_ptr, dv_ptr: dK's and dV's bases, for partial tiles)."""
    HALF: gl.constexpr = k_desc.block_type.shape[0]
    tile = gl.load(order_ptr + gl.program_id(1))
    if DOC_TILES:
        if tile < 0:  # past the last tile
            return
    start_n, key_end, query0, kv_col, lo, full_lo, full_hi, hi, nq, count, head0 = _key_program(
        tile, seg_start_ptr, seg_end_ptr, total, H_Q, H_KV, HEAD_DIM, BLOCK_M, 2 * HALF,
        DOC_TILES)
    k_smem = gl.allocate_shared_memory(k_desc.dtype, [2] + k_desc.block_type.shape,
                                       k_desc.layout)
    v_smem = gl.allocate_shared_memory(v_desc.dtype, [2] + v_desc.block_type.shape,
                                       v_desc.layout)
    kv_bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    qdo_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for h in gl.static_range(2):
        mbarrier.init(kv_bars.index(h), count=1)
    for st in gl.static_range(STAGES):
        mbarrier.init(qdo_empty.index(st), count=2)
    q_smem, do_smem, q_bars, do_bars, lse_src, delta_src, r_bars = _dkdv_query_ring(
        q_desc, do_desc, lse_desc, delta_desc, lse_ptr, delta_ptr, STAGES, LSE_TMA)
    fence_async_shared()
    G: gl.constexpr = H_Q // H_KV
    # Grid tiles: constants, so that the partitions keep no registers for them (ptxas spilled
    # 16 more bytes per thread with these values live to the epilogue).
    if not DOC_TILES:
        key_end = total
        query0 = 0
        dk_ptr = 0
        dv_ptr = 0
    gl.warp_specialize([
        (_dkdv_rows, (k_smem.index(0), v_smem.index(0), kv_bars.index(0), q_smem, do_smem,
                      k_smem, q_bars, do_bars, r_bars, qdo_empty, q_desc, do_desc, dk_desc,
                      dv_desc, lse_src, delta_src, lse_ptr, seg_end_ptr, seg_start_ptr,
                      seg_end_ptr, 0, stride_lh, total, c, sm_scale, kv_col, start_n, tile, lo,
                      full_lo, full_hi, hi, count, nq, head0, key_end, query0, dk_ptr, dv_ptr,
                      HALF, HEAD_DIM, H_Q, G, BLOCK_M, 2 * HALF, STAGES, False, False, False, 4,
                      True, LSE_TMA, DOC_TILES)),
        (_dkdv_rows, (k_smem.index(1), v_smem.index(1), kv_bars.index(1), q_smem, do_smem,
                      k_smem, q_bars, do_bars, r_bars, qdo_empty, q_desc, do_desc, dk_desc,
                      dv_desc, lse_src, delta_src, lse_ptr, seg_end_ptr, seg_start_ptr,
                      seg_end_ptr, 0, stride_lh, total, c, sm_scale, kv_col, start_n + HALF,
                      tile, lo, full_lo, full_hi, hi, count, nq, head0, key_end, query0, dk_ptr,
                      dv_ptr, HALF, HEAD_DIM, H_Q, G, BLOCK_M, 2 * HALF, STAGES, False, False,
                      False, 4, True, LSE_TMA, DOC_TILES)),
        (_dkdv_ws_producer, (k_desc, v_desc, q_desc, do_desc, lse_desc, delta_desc, k_smem,
                             v_smem, kv_bars, q_smem, do_smem, lse_src, delta_src, q_bars,
                             do_bars, r_bars, qdo_empty, start_n, kv_col, count, nq, lo, head0,
                             query0, HEAD_DIM, BLOCK_M, STAGES, LSE_TMA)),
    ], [4, 1], [CONSUMER_REGS, PRODUCER_REGS])


# Persistent dK/dV kernel (FLAMIA_GLUON_DKDV=S,0,persistent; written 2026-12-06 in the eleventh
# session, the default on grid tiles since then, see dkdv_persistent): the warp-specialized
# dK/dV kernel with one program per SM taking the (kv head, key tile) items from a queue, as
# the persistent forward and dQ kernels do (see _work_item): the ring of Q/dO (and lse2/delta) tiles runs on across items, a K/V half of the
# next item loads once its consumer has waited for its last MMA of the current one, and dK/dV
# go out through slots of their own meanwhile. Each key row sees the same steps as in the other
# dK/dV kernels: the same bits (GPU test). Grid tiles only.
@gluon.jit
def _key_item(w, order_ptr, seg_start_ptr, seg_end_ptr, total, H_Q: gl.constexpr,
              H_KV: gl.constexpr, HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr,
              BLOCK_N: gl.constexpr):
    """Work item w of the persistent dK/dV kernel, as _key_program returns it: key tile
    order[w // Hkv] of kv head w % Hkv (the launch order of the (Hkv, tiles) grid)."""
    return _key_program(gl.load(order_ptr + w // H_KV), seg_start_ptr, seg_end_ptr, total, H_Q,
                        H_KV, HEAD_DIM, BLOCK_M, BLOCK_N, False, w % H_KV)


@gluon.jit
def _dkdv_persistent_rows(k_smem, v_smem, kv_bar, kv_empty, dk_smem, dv_smem, q_smem, do_smem,
                          q_bars, do_bars, r_bars, qdo_empty, q_desc, do_desc, dk_desc, dv_desc,
                          lse_src, delta_src, seg_end_ptr, seg_start_ptr, order_ptr, queue_ptr,
                          item_bars, stride_lh, total, c, sm_scale, HALF_INDEX: gl.constexpr,
                          H_Q: gl.constexpr, H_KV: gl.constexpr, HEAD_DIM: gl.constexpr,
                          BLOCK_M: gl.constexpr, STAGES: gl.constexpr, LSE_TMA: gl.constexpr):
    """A consumer of the persistent dK/dV kernel: keys HALF_INDEX * 64 .. of each work item's
    key tile."""
    HALF: gl.constexpr = dk_desc.block_type.shape[0]
    ring0 = 0  # the ring's pairs consumed before this work item
    t = 0  # work items before this one
    w = _read_item(queue_ptr, item_bars, t)
    while w >= 0:
        start_n, _, _, kv_col, lo, full_lo, full_hi, hi, nq, count, head0 = _key_item(
            w, order_ptr, seg_start_ptr, seg_end_ptr, total, H_Q, H_KV, HEAD_DIM, BLOCK_M,
            2 * HALF)
        # (unused with WS and without FUSE_DQ: ds_smem, dqa_ptr, sem_ptr, n_qtiles, tile,
        # dk_ptr, dv_ptr; grid tiles: key_end = total, query0 = 0)
        _dkdv_rows_of(k_smem, v_smem, kv_bar, q_smem, do_smem, k_smem, q_bars, do_bars, r_bars,
                      qdo_empty, q_desc, do_desc, dk_desc, dv_desc, lse_src, delta_src,
                      seg_end_ptr, seg_end_ptr, seg_start_ptr, seg_end_ptr, 0, stride_lh, total,
                      c, sm_scale, kv_col, start_n + HALF_INDEX * HALF, w, lo, full_lo, full_hi,
                      hi, count, nq, head0, total, 0, 0, 0, HALF, HEAD_DIM, H_Q, H_Q // H_KV,
                      BLOCK_M, 2 * HALF, STAGES, False, False, False, 4, True, LSE_TMA, False,
                      ring0, t & 1, kv_empty, dk_smem, dv_smem)
        ring0 += count
        t += 1
        w = _read_item(queue_ptr, item_bars, t)
    tma.store_wait(pendings=0)  # the last dK/dV tiles are out before the program's memory goes


@gluon.jit
def _dkdv_persistent_producer(k_desc, v_desc, q_desc, do_desc, lse_desc, delta_desc, k_smem,
                              v_smem, kv_bars, kv_empty, q_smem, do_smem, lse_src, delta_src,
                              q_bars, do_bars, r_bars, qdo_empty, seg_end_ptr, seg_start_ptr,
                              order_ptr, queue_ptr, item_bars, total, n_work, H_Q: gl.constexpr,
                              H_KV: gl.constexpr, HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr,
                              STAGES: gl.constexpr, LSE_TMA: gl.constexpr):
    """The producer warp of the persistent dK/dV kernel: _dkdv_ws_producer for each work item it
    takes from the queue (item t's number slot is free again: see _take_item; here the producer
    takes item t after loading item t - 1's K and V, which waited for both consumers to be done
    with item t - 2)."""
    ring0 = 0
    t = 0
    w = _take_item(queue_ptr, item_bars, t, n_work)
    while w >= 0:
        start_n, _, _, kv_col, lo, _, _, _, nq, count, head0 = _key_item(
            w, order_ptr, seg_start_ptr, seg_end_ptr, total, H_Q, H_KV, HEAD_DIM, BLOCK_M,
            2 * k_desc.block_type.shape[0])
        _dkdv_ws_producer(k_desc, v_desc, q_desc, do_desc, lse_desc, delta_desc, k_smem, v_smem,
                          kv_bars, q_smem, do_smem, lse_src, delta_src, q_bars, do_bars, r_bars,
                          qdo_empty, start_n, kv_col, count, nq, lo, head0, 0, HEAD_DIM, BLOCK_M,
                          STAGES, LSE_TMA, ring0, t & 1, kv_empty)
        ring0 += count
        t += 1
        w = _take_item(queue_ptr, item_bars, t, n_work)


@gluon.jit
def _attn_bwd_dkdv_hopper_persistent_kernel(
    q_desc, k_desc, v_desc, do_desc, dk_desc, dv_desc, lse_ptr, delta_ptr, lse_desc, delta_desc,
    seg_end_ptr, order_ptr, seg_start_ptr, queue_ptr, stride_lh, total, c, sm_scale, n_work,
    H_Q: gl.constexpr, H_KV: gl.constexpr, HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr,
    STAGES: gl.constexpr, LSE_TMA: gl.constexpr, CONSUMER_REGS: gl.constexpr,
    PRODUCER_REGS: gl.constexpr, num_warps: gl.constexpr,
):
    """Grid (programs,), at most one per SM; n_work = Hkv x key tiles; queue_ptr: int32 [1 + 2 x
    programs], zero (_take_item); num_warps = 4 (the default partition); descriptors and LSE_TMA
    as _attn_bwd_dkdv_hopper_ws_kernel's. Shared memory at D = 128: K, V, dK and dV 2 x 16 KB
    each, the ring 2 x 32 KB (and lse2/delta)."""
    k_smem = gl.allocate_shared_memory(k_desc.dtype, [2] + k_desc.block_type.shape,
                                       k_desc.layout)
    v_smem = gl.allocate_shared_memory(v_desc.dtype, [2] + v_desc.block_type.shape,
                                       v_desc.layout)
    dk_smem = gl.allocate_shared_memory(dk_desc.dtype, [2] + dk_desc.block_type.shape,
                                        dk_desc.layout)
    dv_smem = gl.allocate_shared_memory(dv_desc.dtype, [2] + dv_desc.block_type.shape,
                                        dv_desc.layout)
    kv_bars = _barriers(2, 1)
    kv_empty, item_bars = _persistent_barriers()
    qdo_empty = _barriers(STAGES, 2)
    q_smem, do_smem, q_bars, do_bars, lse_src, delta_src, r_bars = _dkdv_query_ring(
        q_desc, do_desc, lse_desc, delta_desc, lse_ptr, delta_ptr, STAGES, LSE_TMA)
    fence_async_shared()
    gl.warp_specialize([
        (_dkdv_persistent_rows, (k_smem.index(0), v_smem.index(0), kv_bars.index(0),
                                 kv_empty.index(0), dk_smem.index(0), dv_smem.index(0), q_smem,
                                 do_smem, q_bars, do_bars, r_bars, qdo_empty, q_desc, do_desc,
                                 dk_desc, dv_desc, lse_src, delta_src, seg_end_ptr,
                                 seg_start_ptr, order_ptr, queue_ptr, item_bars, stride_lh,
                                 total, c, sm_scale, 0, H_Q, H_KV, HEAD_DIM, BLOCK_M, STAGES,
                                 LSE_TMA)),
        (_dkdv_persistent_rows, (k_smem.index(1), v_smem.index(1), kv_bars.index(1),
                                 kv_empty.index(1), dk_smem.index(1), dv_smem.index(1), q_smem,
                                 do_smem, q_bars, do_bars, r_bars, qdo_empty, q_desc, do_desc,
                                 dk_desc, dv_desc, lse_src, delta_src, seg_end_ptr,
                                 seg_start_ptr, order_ptr, queue_ptr, item_bars, stride_lh,
                                 total, c, sm_scale, 1, H_Q, H_KV, HEAD_DIM, BLOCK_M, STAGES,
                                 LSE_TMA)),
        (_dkdv_persistent_producer, (k_desc, v_desc, q_desc, do_desc, lse_desc, delta_desc,
                                     k_smem, v_smem, kv_bars, kv_empty, q_smem, do_smem, lse_src,
                                     delta_src, q_bars, do_bars, r_bars, qdo_empty, seg_end_ptr,
                                     seg_start_ptr, order_ptr, queue_ptr, item_bars, total,
                                     n_work, H_Q, H_KV, HEAD_DIM, BLOCK_M, STAGES, LSE_TMA)),
    ], [4, 1], [CONSUMER_REGS, PRODUCER_REGS])


# ------------------------------------------------------------------------------------------
# Backward, FP8 (mxfp8, nvfp4_fp8): dK and dV of a key tile in one warp-specialized kernel
# ------------------------------------------------------------------------------------------

# The triton FP8 backward runs dK/dV as two kernels (kernels.attention.dkdv_parts: with dK, dV,
# S^T and dP^T in one program's registers it spills), each recomputing S^T = K Q^T and P^T.
# This kernel computes S^T and P^T once per (key tile, query tile) pair and splits the work
# between two consumer warpgroups over the same 64 keys:
#   P partition:  S^T = K Q^T, P^T, P'^T = P^T sdO quantized per row, dV += P'^T dO;
#   dS partition: dP^T = V dO^T, dS^T = P^T (dP^T sV - delta), dS'^T = dS^T sQ quantized per
#                 row, dK += dS'^T Q;
# P^T goes from the first to the second through shared memory (fp32, exactly the values the
# P partition used; a 2-slot ring with ready / free mbarriers). Each warpgroup holds one fp32
# accumulator (64 keys x D) and one MMA result, as each triton kernel of the split does, so
# neither spills, and each one's MMAs run while the other does its element-wise work. A producer
# warp brings K and V once and, per pair, Q and dO^T's token-contiguous copy (the P partition's
# operands), dO and Q's token-contiguous copy (the dS partition's) and the pair's per-query rows
# (lse2, delta, sQ, sdO: 1 KB, read from shared memory by both) into a ring.
# Same tiles (64 queries x 64 keys; the query tile is the recipe's 64-token group of P'^T and
# dS'^T) and the same operations per element in the same order as the triton kernels, so the
# same bits: the plan is shared with them. By default (since 2026-12-07) both partitions run
# the FP8 forward's in-flight schedule ("pipe": the dV / dK MMA of one pair runs while the next
# pair's P'^T / dS'^T is made) over 3 ring slots: compiled (triton 3.6) no spills once the
# per-query rows come from shared memory (with them loaded from global memory the P partition
# spilled 280 B per thread), 466 + 485 instructions per unmasked pair instead of 430 + 423 (the
# carried operand reaches its MMA layout through shared memory), and yet 3-6% less dK/dV time
# than each partition waiting for its own MMAs ("wait", the default before; H100, 2026-12-07,
# bench/results/dkdv8_variants_20261207-0927_H100.txt: one document 4.64 -> 4.36 ms, U(32,
# 1024) 0.751 -> 0.756; the grid's workloads, bench/results/attention_20261207-0936_*pipe*:
# mxfp8 fwd+bwd -3.6% to +0.6%). With 2 slots the in-flight schedule starves (one document
# 6.35 ms). nvfp4_fp8 (bf16-held Q and K, 48 KB ring slots) keeps the former default: with
# the in-flight schedule its fwd+bwd moved by -2.9% to +1.3%, its dK/dV kernel mostly slower.
DKDV8_CONFIG = (64, 64, 3)  # (BLOCK_M queries, BLOCK_N keys, ring slots) of E4M3 Q and K
DKDV8_SCHEDULE = "pipe"
DKDV8_BF16_QK = (2, "wait")  # (ring slots, schedule) with nvfp4_fp8's bf16-held Q and K
DKDV8_CONSUMER_REGS = 240  # 2 x 128 x 240 + 32 x 24 <= 65536 registers
DKDV8_PRODUCER_REGS = 24
# P^T tiles in flight between the partitions (16 KB of shared memory each). A third one
# (FLAMIA_GLUON_DKDV8=3,pipe,pt3) is bitwise the same and measured within 0.7% (H100,
# 2026-12-07 15:01, bench/results/dkdv8_variants_20261207-1501_H100.txt: dK/dV kernel 0.3-0.7%
# faster on packed workloads, the same on one document), while ptxas spills 100 B with it, so
# it stays a setting.
DKDV8_PT_SLOTS = 2
# The persistent form of the kernel (_attn_bwd_dkdv8_hopper_persistent_kernel): opt-in until
# timed against the plain one on the GPU.
DKDV8_PERSISTENT = False


def dkdv8_setting(qk_dtype=torch.float8_e4m3fn) -> tuple[int, str, int]:
    """(ring slots, schedule, P^T slots) of the FP8 dK/dV kernel: DKDV8_CONFIG's slots,
    DKDV8_SCHEDULE and DKDV8_PT_SLOTS (DKDV8_BF16_QK for Q and K of dtype bfloat16,
    nvfp4_fp8's), or FLAMIA_GLUON_DKDV8="S" (wait: each partition waits for its MMAs within the
    step) / "S,pipe" / "S,pair" (sweeps; S = 2 or 3: at D = 128 a slot holds four 8 KB tiles,
    48 KB with nvfp4_fp8's bf16 Q tiles, so 4 would not fit in shared memory; pipe: the
    in-flight schedule of both partitions, _dkdv8_p_step and _dkdv8_ds_step, which release ring
    slots a step later; pair: two query tiles per step in both partitions, _dkdv8_p_pair and
    _dkdv8_ds_pair), optionally followed by ",pt2" or ",pt3": the P^T tiles in flight from
    the P partition to the dS partition (_hand_pt), then optionally by ",persistent"
    (dkdv8_persistent); read at every launch."""
    text = os.environ.get("FLAMIA_GLUON_DKDV8")
    fields = text.split(",") if text else []
    if fields[-1:] == ["persistent"]:
        fields.pop()
    if not fields:
        if qk_dtype == torch.bfloat16:
            return (*DKDV8_BF16_QK, DKDV8_PT_SLOTS)
        return DKDV8_CONFIG[2], DKDV8_SCHEDULE, DKDV8_PT_SLOTS
    pt_slots = DKDV8_PT_SLOTS
    if fields[-1] in ("pt2", "pt3"):
        pt_slots = int(fields.pop()[2:])
    if fields[:1] not in (["2"], ["3"]) or fields[1:] not in ([], ["pipe"], ["pair"]):
        raise ValueError(f"FLAMIA_GLUON_DKDV8={text!r}; accepted: ring slots 2 or 3, optionally "
                         "followed by ,pipe or ,pair, then optionally by the P^T slots ,pt2 or "
                         ",pt3, then optionally by ,persistent (e.g. 3,pipe or "
                         "3,pipe,pt3,persistent; persistent alone: the default schedule)")
    return int(fields[0]), (fields[1:] or ["wait"])[0], pt_slots


def dkdv8_persistent() -> bool:
    """Whether the FP8 dK/dV kernel runs persistent (_attn_bwd_dkdv8_hopper_persistent_kernel):
    FLAMIA_GLUON_DKDV8 ending in ",persistent" (or "persistent" alone) asks for it, any other
    setting not; unset: DKDV8_PERSISTENT. Read at every launch."""
    text = os.environ.get("FLAMIA_GLUON_DKDV8")
    if not text:
        return DKDV8_PERSISTENT
    return text.split(",")[-1] == "persistent"


@gluon.jit
def _query_rows8(qrow_smem, slot, s_layout: gl.constexpr):
    """lse2, delta, sQ, sdO of a pair's query tile from its [BLOCK_M, 4] rows in ring slot
    ``slot`` (kernels.attention.QROW; TMA-loaded by the producer, 0 past the last token as the
    triton kernels load them), in the layout of S^T's columns: each thread reads the 16-byte
    rows of the queries S^T's accumulator layout puts in its columns (_column_rows_layout)."""
    BLOCK_M: gl.constexpr = qrow_smem.shape[2]
    tile = qrow_smem.index(slot).reshape([BLOCK_M, 4])
    rows = tile.load(_column_rows_layout(4, BLOCK_M, False))
    even, odd = gl.split(gl.reshape(rows, [BLOCK_M, 2, 2]))  # fields (0, 2) and (1, 3)
    lse, sq = gl.split(even)
    delta, sdo = gl.split(odd)
    cols: gl.constexpr = gl.SliceLayout(0, s_layout)
    return (gl.convert_layout(lse, cols), gl.convert_layout(delta, cols),
            gl.convert_layout(sq, cols), gl.convert_layout(sdo, cols))


@gluon.jit
def _visible_t(x, offs_n, seg_end_n, m, BLOCK_M: gl.constexpr, s_layout: gl.constexpr):
    """x [keys, queries] with the entries a key cannot see set to 0: queries of its own segment
    from the key on (kernels.attention._dkdv_tile's mask)."""
    offs_m = m * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(0, s_layout))
    visible = ((gl.expand_dims(offs_m, 0) >= gl.expand_dims(offs_n, 1))
               & (gl.expand_dims(offs_m, 0) < gl.expand_dims(seg_end_n, 1)))
    return gl.where(visible, x, 0.0)


@gluon.jit
def _pair_start(a_smem, ring, bars, qrow_smem, r_bars, zero, i, STAGES: gl.constexpr,
                s_layout: gl.constexpr):
    """A partition's first MMA of pair i, a @ tile^T for the pair's [64 tokens, D] tile in its
    ring slot (S^T = K Q^T, dP^T = V dO^T), and the pair's per-query rows (_query_rows8, read
    while the MMA runs), once the slot's TMA loads have landed: (a @ tile^T, lse2, delta, sQ,
    sdO)."""
    acc = _pair_issue(a_smem, ring, bars, zero, i, STAGES)
    lse, delta, sq, sdo = _pair_rows(qrow_smem, r_bars, i, STAGES, s_layout)
    acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, ))
    return acc, lse, delta, sq, sdo


@gluon.jit
def _pair_issue(a_smem, ring, bars, zero, i, STAGES: gl.constexpr):
    """a @ tile^T of pair i issued (asynchronous) once its ring slot's TMA loads have landed."""
    slot = i % STAGES
    mbarrier.wait(bars.index(slot), (i // STAGES) & 1)
    return warpgroup_mma(a_smem, ring.index(slot).permute((1, 0)), zero, use_acc=False,
                         is_async=True)


@gluon.jit
def _pair_rows(qrow_smem, r_bars, i, STAGES: gl.constexpr, s_layout: gl.constexpr):
    """Pair i's per-query rows (_query_rows8) once they have landed: lse2, delta, sQ, sdO."""
    slot = i % STAGES
    mbarrier.wait(r_bars.index(slot), (i // STAGES) & 1)
    return _query_rows8(qrow_smem, slot, s_layout)


@gluon.jit
def _pair_start_inflight(a_smem, ring, bars, prev_op, prev_ring, prev_zero, qrow_smem, r_bars,
                         zero, i, STAGES: gl.constexpr, s_layout: gl.constexpr):
    """_pair_start with the previous pair's last MMA, prev_op @ its prev_ring tile (P'^T dO,
    dS'^T Q), issued right after pair i's first one and left running: (a @ tile^T, that MMA in
    flight, lse2, delta, sQ, sdO)."""
    slot = i % STAGES
    phase = (i // STAGES) & 1
    mbarrier.wait(bars.index(slot), phase)
    acc = warpgroup_mma(a_smem, ring.index(slot).permute((1, 0)), zero, use_acc=False,
                        is_async=True)
    x = warpgroup_mma(prev_op, prev_ring.index((i - 1) % STAGES).permute((1, 0)), prev_zero,
                      use_acc=False, is_async=True)
    mbarrier.wait(r_bars.index(slot), phase)
    lse, delta, sq, sdo = _query_rows8(qrow_smem, slot, s_layout)
    acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc, ))
    return acc, x, lse, delta, sq, sdo


@gluon.jit
def _mma_done(acc, x, scale, qdo_empty, slot):
    """acc + X * scale once the MMA X (from a zero accumulator) is done, its row scales (powers
    of two) applied in fp32 as the triton kernel applies them; ring slot ``slot`` released."""
    x = warpgroup_mma_wait(num_outstanding=0, deps=(x, ))
    mbarrier.arrive(qdo_empty.index(slot))
    return acc + x * gl.expand_dims(scale, 1)


@gluon.jit
def _dkdv8_p_tile(st, lse, sq, sdo, c_k, pt_smem, p_ready, p_free, offs_n, seg_end_n, m, i,
                  MASKED: gl.constexpr, BLOCK_M: gl.constexpr, s_layout: gl.constexpr):
    """P^T of pair i (query tile m) from S^T (kernels.attention._dkdv_tile: exp2(S^T sQ c_K -
    lse2), masked), handed to the dS partition through shared memory, and P'^T = P^T sdO scaled
    for E4M3 per row (_quantize_p8; cast at its MMA) with its row scales."""
    pt = _p_values(st, lse, sq, c_k, offs_n, seg_end_n, m, MASKED, BLOCK_M, s_layout)
    _hand_pt(pt, pt_smem, p_ready, p_free, i)
    return _quantize_p8(pt, sdo)


@gluon.jit
def _p_values(st, lse, sq, c_k, offs_n, seg_end_n, m, MASKED: gl.constexpr,
              BLOCK_M: gl.constexpr, s_layout: gl.constexpr):
    """P^T of query tile m from S^T (kernels.attention._dkdv_tile: exp2(S^T sQ c_K - lse2),
    masked)."""
    # (S^T sQ) c_K - lse2: one FMA per element after sQ (exact for E8M0 scales), as triton's.
    pt = gl.exp2(st * gl.expand_dims(sq, 0) * gl.expand_dims(c_k, 1) - gl.expand_dims(lse, 0))
    if MASKED:
        pt = _visible_t(pt, offs_n, seg_end_n, m, BLOCK_M, s_layout)
    return pt


@gluon.jit
def _hand_pt(pt, pt_smem, p_ready, p_free, i):
    """P^T of pair i to the dS partition: into slot i % PT_SLOTS of pt_smem once that partition
    has read what was there."""
    PT_SLOTS: gl.constexpr = pt_smem.shape[0]
    ps = i % PT_SLOTS
    # A fresh mbarrier counts as having completed the phase before its first: the first
    # round's waits (parity 1) pass at once.
    mbarrier.wait(p_free.index(ps), ((i // PT_SLOTS) & 1) ^ 1)
    pt_smem.index(ps).store(pt)
    cta_barrier()  # this partition's warps only (a named barrier): all of P^T is stored
    mbarrier.arrive(p_ready.index(ps))


@gluon.jit
def _dkdv8_p_mma(dv, pq, scale, dot_smem, qdo_empty, slot, dv_zero, op_layout: gl.constexpr):
    """dV += P'^T dO for the pair in ring slot ``slot`` (the MMA from a zero accumulator, the
    row scales applied in fp32, as the triton kernel applies them); the slot released."""
    x = warpgroup_mma(_p8_operand(pq, op_layout), dot_smem.index(slot).permute((1, 0)), dv_zero,
                      use_acc=False, is_async=True)
    return _mma_done(dv, x, scale, qdo_empty, slot)


@gluon.jit
def _dkdv8_p_step(dv, pq, p_scale, k_smem, q_smem, dot_smem, q_bars, qdo_empty, pt_smem,
                  p_ready, p_free, qrow_smem, r_bars, c_k, offs_n, seg_end_n, s_zero, dv_zero,
                  m, i, MASKED: gl.constexpr, BLOCK_M: gl.constexpr, STAGES: gl.constexpr,
                  PIPE: gl.constexpr, s_layout: gl.constexpr, dv_layout: gl.constexpr,
                  op_layout: gl.constexpr):
    """Pair i (query tile m) of the P partition: S^T = K Q^T, P^T to the dS partition and
    P'^T (_dkdv8_p_tile), dV += P'^T dO. PIPE: S^T_i issued together with the dV MMA of pair
    i - 1 (pq, p_scale: its P'^T), which runs while P'^T_i is made, as _dkdv8_ds_step."""
    rows: gl.constexpr = gl.SliceLayout(1, dv_layout)
    if PIPE:
        st, x, lse, _, sq, sdo = _pair_start_inflight(
            k_smem, q_smem, q_bars, _p8_operand(pq, op_layout), dot_smem, dv_zero, qrow_smem,
            r_bars, s_zero, i, STAGES, s_layout)
        pq, scale = _dkdv8_p_tile(st, lse, sq, sdo, c_k, pt_smem, p_ready, p_free, offs_n,
                                  seg_end_n, m, i, MASKED, BLOCK_M, s_layout)
        dv = _mma_done(dv, x, p_scale, qdo_empty, (i - 1) % STAGES)
    else:
        st, lse, _, sq, sdo = _pair_start(k_smem, q_smem, q_bars, qrow_smem, r_bars, s_zero, i,
                                          STAGES, s_layout)
        pq, scale = _dkdv8_p_tile(st, lse, sq, sdo, c_k, pt_smem, p_ready, p_free, offs_n,
                                  seg_end_n, m, i, MASKED, BLOCK_M, s_layout)
        dv = _dkdv8_p_mma(dv, pq, gl.convert_layout(scale, rows), dot_smem, qdo_empty,
                          i % STAGES, dv_zero, op_layout)
    return dv, pq, gl.convert_layout(scale, rows)


@gluon.jit
def _dkdv8_ds_tile(dpt, delta, sq, sdo, sv, pt_smem, p_ready, p_free, i,
                   s_layout: gl.constexpr):
    """dS'^T of pair i from dP^T and the P partition's P^T: dS^T = P^T (dP^T sdO sV - delta),
    times sQ, scaled for E4M3 per row, with its row scales (cast at its MMA, _ds8_operand)."""
    return _ds_values(_take_pt(pt_smem, p_ready, p_free, i, s_layout), dpt, delta, sq, sdo, sv)


@gluon.jit
def _take_pt(pt_smem, p_ready, p_free, i, s_layout: gl.constexpr):
    """P^T of pair i from the P partition (_hand_pt); its slot released."""
    PT_SLOTS: gl.constexpr = pt_smem.shape[0]
    ps = i % PT_SLOTS
    mbarrier.wait(p_ready.index(ps), (i // PT_SLOTS) & 1)
    pt = pt_smem.index(ps).load(s_layout)
    cta_barrier()  # every warp of this partition has read P^T
    mbarrier.arrive(p_free.index(ps))
    return pt


@gluon.jit
def _ds_values(pt, dpt, delta, sq, sdo, sv):
    """dS'^T = P^T (dP^T sdO sV - delta) sQ scaled for E4M3 per row, with its row scales."""
    # (dP^T sdO) sV - delta: one FMA per element after sdO (exact for E8M0 scales), as triton's.
    dst = pt * (dpt * gl.expand_dims(sdo, 0) * gl.expand_dims(sv, 1) - gl.expand_dims(delta, 0))
    dsf = dst * gl.expand_dims(sq, 0)
    return _scale_rows(dsf, gl.abs(dsf))


@gluon.jit
def _ds8_operand(dsq, op_layout: gl.constexpr, QK_BF16: gl.constexpr):
    """The MMA operand of scaled dS'^T: E4M3, widened (exactly) to bf16 against nvfp4_fp8's
    bf16-held NVFP4 Q."""
    ds8 = dsq.to(gl.float8e4nv)
    if QK_BF16:
        ds8 = ds8.to(gl.bfloat16)
    return gl.convert_layout(ds8, op_layout)


@gluon.jit
def _dkdv8_ds_mma(dk, dsq, scale, qt_smem, qdo_empty, slot, dk_zero, op_layout: gl.constexpr,
                  QK_BF16: gl.constexpr):
    """dK += dS'^T Q for the pair in ring slot ``slot`` (the MMA from a zero accumulator, the
    row scales applied in fp32, as the triton kernel applies them); the slot released."""
    x = warpgroup_mma(_ds8_operand(dsq, op_layout, QK_BF16), qt_smem.index(slot).permute((1, 0)),
                      dk_zero, use_acc=False, is_async=True)
    return _mma_done(dk, x, scale, qdo_empty, slot)


@gluon.jit
def _dkdv8_ds_step(dk, dsq, ds_scale, v_smem, do_smem, qt_smem, do_bars, qdo_empty, pt_smem,
                   p_ready, p_free, qrow_smem, r_bars, sv, s_zero, dk_zero, i,
                   STAGES: gl.constexpr, PIPE: gl.constexpr, s_layout: gl.constexpr,
                   dk_layout: gl.constexpr, op_layout: gl.constexpr, QK_BF16: gl.constexpr):
    """Pair i of the dS partition (no masking: P^T comes masked): dP^T = V dO^T, dS'^T from it
    and the P partition's P^T (_dkdv8_ds_tile), dK += dS'^T Q. PIPE: dP^T_i is issued together
    with the dK MMA of pair i - 1 (dsq, ds_scale: its dS'^T), which runs while dS'^T_i is made
    (the FP8 forward's schedule, _fwd8_step); dS'^T_i is returned for the next step."""
    rows: gl.constexpr = gl.SliceLayout(1, dk_layout)
    if PIPE:
        dpt, x, _, delta, sq, sdo = _pair_start_inflight(
            v_smem, do_smem, do_bars, _ds8_operand(dsq, op_layout, QK_BF16), qt_smem, dk_zero,
            qrow_smem, r_bars, s_zero, i, STAGES, s_layout)
        dsq, scale = _dkdv8_ds_tile(dpt, delta, sq, sdo, sv, pt_smem, p_ready, p_free, i,
                                    s_layout)
        dk = _mma_done(dk, x, ds_scale, qdo_empty, (i - 1) % STAGES)
    else:
        dpt, _, delta, sq, sdo = _pair_start(v_smem, do_smem, do_bars, qrow_smem, r_bars, s_zero,
                                             i, STAGES, s_layout)
        dsq, scale = _dkdv8_ds_tile(dpt, delta, sq, sdo, sv, pt_smem, p_ready, p_free, i,
                                    s_layout)
        dk = _dkdv8_ds_mma(dk, dsq, gl.convert_layout(scale, rows), qt_smem, qdo_empty,
                           i % STAGES, dk_zero, op_layout, QK_BF16)
    return dk, dsq, gl.convert_layout(scale, rows)


# The pair schedule (FLAMIA_GLUON_DKDV8=S,pair): each partition runs two query tiles per step:
# both first MMAs issued together, the two tiles' element-wise chains (exponentials, P^T's
# hand-off, the row maxima and scaling of P'^T or dS'^T) side by side, then both last MMAs from
# zero accumulators, added in pair order. Both partitions pair the same tiles (each query head's
# masked, unmasked, masked ranges, an odd range's last tile alone), so a step waits only for the
# other partition's previous steps: no deadlock with 2 ring slots or 2 P^T slots. Per tile the
# same operations in the same order: the same bits (GPU test).
@gluon.jit
def _dkdv8_p_pair(dv, k_smem, q_smem, dot_smem, q_bars, qdo_empty, pt_smem, p_ready, p_free,
                  qrow_smem, r_bars, c_k, offs_n, seg_end_n, s_zero, dv_zero, m, i,
                  MASKED: gl.constexpr, BLOCK_M: gl.constexpr, STAGES: gl.constexpr,
                  s_layout: gl.constexpr, dv_layout: gl.constexpr, op_layout: gl.constexpr):
    """Pairs i and i + 1 (query tiles m and m + 1) of the P partition in one step."""
    st_a = _pair_issue(k_smem, q_smem, q_bars, s_zero, i, STAGES)
    st_b = _pair_issue(k_smem, q_smem, q_bars, s_zero, i + 1, STAGES)
    lse_a, _, sq_a, sdo_a = _pair_rows(qrow_smem, r_bars, i, STAGES, s_layout)
    lse_b, _, sq_b, sdo_b = _pair_rows(qrow_smem, r_bars, i + 1, STAGES, s_layout)
    st_a, st_b = warpgroup_mma_wait(num_outstanding=0, deps=(st_a, st_b))
    pt_a = _p_values(st_a, lse_a, sq_a, c_k, offs_n, seg_end_n, m, MASKED, BLOCK_M, s_layout)
    pt_b = _p_values(st_b, lse_b, sq_b, c_k, offs_n, seg_end_n, m + 1, MASKED, BLOCK_M,
                     s_layout)
    _hand_pt(pt_a, pt_smem, p_ready, p_free, i)
    _hand_pt(pt_b, pt_smem, p_ready, p_free, i + 1)
    pq_a, scale_a = _quantize_p8(pt_a, sdo_a)
    pq_b, scale_b = _quantize_p8(pt_b, sdo_b)
    x_a = warpgroup_mma(_p8_operand(pq_a, op_layout), dot_smem.index(i % STAGES).permute((1, 0)),
                        dv_zero, use_acc=False, is_async=True)
    x_b = warpgroup_mma(_p8_operand(pq_b, op_layout),
                        dot_smem.index((i + 1) % STAGES).permute((1, 0)), dv_zero, use_acc=False,
                        is_async=True)
    return _pair_done(dv, x_a, x_b, scale_a, scale_b, qdo_empty, i, STAGES, dv_layout)


@gluon.jit
def _pair_done(acc, x_a, x_b, scale_a, scale_b, qdo_empty, i, STAGES: gl.constexpr,
               layout: gl.constexpr):
    """(acc + X_a * scale_a) + X_b * scale_b once both MMAs (from zero accumulators) are done,
    as _mma_done twice; ring slots of pairs i and i + 1 released."""
    x_a, x_b = warpgroup_mma_wait(num_outstanding=0, deps=(x_a, x_b))
    mbarrier.arrive(qdo_empty.index(i % STAGES))
    mbarrier.arrive(qdo_empty.index((i + 1) % STAGES))
    rows: gl.constexpr = gl.SliceLayout(1, layout)
    acc = acc + x_a * gl.expand_dims(gl.convert_layout(scale_a, rows), 1)
    return acc + x_b * gl.expand_dims(gl.convert_layout(scale_b, rows), 1)


@gluon.jit
def _dkdv8_ds_pair(dk, v_smem, do_smem, qt_smem, do_bars, qdo_empty, pt_smem, p_ready, p_free,
                   qrow_smem, r_bars, sv, s_zero, dk_zero, i, STAGES: gl.constexpr,
                   s_layout: gl.constexpr, dk_layout: gl.constexpr, op_layout: gl.constexpr,
                   QK_BF16: gl.constexpr):
    """Pairs i and i + 1 of the dS partition in one step."""
    dpt_a = _pair_issue(v_smem, do_smem, do_bars, s_zero, i, STAGES)
    dpt_b = _pair_issue(v_smem, do_smem, do_bars, s_zero, i + 1, STAGES)
    _, delta_a, sq_a, sdo_a = _pair_rows(qrow_smem, r_bars, i, STAGES, s_layout)
    dpt_a, dpt_b = warpgroup_mma_wait(num_outstanding=0, deps=(dpt_a, dpt_b))
    dsq_a, scale_a = _ds_values(_take_pt(pt_smem, p_ready, p_free, i, s_layout), dpt_a, delta_a,
                                sq_a, sdo_a, sv)
    # dK's MMA of pair i runs while dS'^T of pair i + 1 is made, and is waited for before the
    # next one is issued, and pair i + 1's per-query rows (16 registers per field) are read
    # only then: with both MMA results, dK, both tiles and both pairs' rows live at once this
    # partition spilled 37 registers per step (triton 3.6).
    rows: gl.constexpr = gl.SliceLayout(1, dk_layout)
    x = warpgroup_mma(_ds8_operand(dsq_a, op_layout, QK_BF16),
                      qt_smem.index(i % STAGES).permute((1, 0)), dk_zero, use_acc=False,
                      is_async=True)
    _, delta_b, sq_b, sdo_b = _pair_rows(qrow_smem, r_bars, i + 1, STAGES, s_layout)
    dsq_b, scale_b = _ds_values(_take_pt(pt_smem, p_ready, p_free, i + 1, s_layout), dpt_b,
                                delta_b, sq_b, sdo_b, sv)
    dk = _mma_done(dk, x, gl.convert_layout(scale_a, rows), qdo_empty, i % STAGES)
    return _dkdv8_ds_mma(dk, dsq_b, gl.convert_layout(scale_b, rows), qt_smem, qdo_empty,
                         (i + 1) % STAGES, dk_zero, op_layout, QK_BF16)


@gluon.jit
def _dkdv8_p_range(dv, k_smem, q_smem, dot_smem, q_bars, qdo_empty, pt_smem, p_ready, p_free,
                   qrow_smem, r_bars, c_k, offs_n, seg_end_n, s_zero, dv_zero, start, end, base,
                   MASKED: gl.constexpr, BLOCK_M: gl.constexpr, STAGES: gl.constexpr,
                   s_layout: gl.constexpr, dv_layout: gl.constexpr, op_layout: gl.constexpr):
    """The P partition's query tiles start .. end - 1 (pair base + m) in pair steps, the last
    one alone if their count is odd."""
    for m in range(start, end - 1, 2):
        dv = _dkdv8_p_pair(dv, k_smem, q_smem, dot_smem, q_bars, qdo_empty, pt_smem, p_ready,
                           p_free, qrow_smem, r_bars, c_k, offs_n, seg_end_n, s_zero, dv_zero, m,
                           base + m, MASKED, BLOCK_M, STAGES, s_layout, dv_layout, op_layout)
    if (end - start) % 2 == 1:
        dv, _, _ = _dkdv8_p_step(dv, s_zero, c_k, k_smem, q_smem, dot_smem, q_bars, qdo_empty,
                                 pt_smem, p_ready, p_free, qrow_smem, r_bars, c_k, offs_n,
                                 seg_end_n, s_zero, dv_zero, end - 1, base + end - 1, MASKED,
                                 BLOCK_M, STAGES, False, s_layout, dv_layout, op_layout)
    return dv


@gluon.jit
def _dkdv8_ds_range(dk, v_smem, do_smem, qt_smem, do_bars, qdo_empty, pt_smem, p_ready, p_free,
                    qrow_smem, r_bars, sv, s_zero, dk_zero, start, end, STAGES: gl.constexpr,
                    s_layout: gl.constexpr, dk_layout: gl.constexpr, op_layout: gl.constexpr,
                    QK_BF16: gl.constexpr):
    """The dS partition's pairs start .. end - 1 in pair steps, paired as _dkdv8_p_range pairs
    them (the last one alone if their count is odd)."""
    for i in range(start, end - 1, 2):
        dk = _dkdv8_ds_pair(dk, v_smem, do_smem, qt_smem, do_bars, qdo_empty, pt_smem, p_ready,
                            p_free, qrow_smem, r_bars, sv, s_zero, dk_zero, i, STAGES, s_layout,
                            dk_layout, op_layout, QK_BF16)
    if (end - start) % 2 == 1:
        dk, _, _ = _dkdv8_ds_step(dk, s_zero, sv, v_smem, do_smem, qt_smem, do_bars, qdo_empty,
                                  pt_smem, p_ready, p_free, qrow_smem, r_bars, sv, s_zero,
                                  dk_zero, end - 1, STAGES, False, s_layout, dk_layout,
                                  op_layout, QK_BF16)
    return dk


@gluon.jit
def _dkdv8_p_rows(k_smem, kv_bar, q_smem, dot_smem, q_bars, qdo_empty, pt_smem, p_ready, p_free,
                  qrow_smem, r_bars, dv_ptr, skv_ptr, seg_end_ptr, total, qk_scale, kv_col,
                  start_n, lo, full_lo, full_hi, hi, nq, HEAD_DIM: gl.constexpr,
                  H_KV: gl.constexpr, G: gl.constexpr, BLOCK_M: gl.constexpr,
                  BLOCK_N: gl.constexpr, STAGES: gl.constexpr, QK_K: gl.constexpr,
                  PIPE: gl.constexpr, PAIR: gl.constexpr = False, ring0=0, kv_phase=0,
                  kv_empty=None):
    """The P partition (see DKDV8_CONFIG): dV of keys start_n .. start_n + 63 over the
    (query head, query tile) pairs of the ring. QK_K: the K step of S^T's MMA (32 for E4M3 Q and
    K, 16 for nvfp4_fp8's bf16-held values). PIPE: see _dkdv8_p_step; PAIR: _dkdv8_p_pair.
    ring0, kv_phase, kv_empty: the persistent kernel's (pairs of the ring consumed before this
    work item, the phase of kv_bar, the barrier that frees this item's K and V)."""
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_M, QK_K])
    dv_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, HEAD_DIM, 32])
    op_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=dv_layout, k_width=4)
    offs_n = start_n + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, s_layout))
    key_ok = offs_n < total
    seg_end_n = gl.load(seg_end_ptr + offs_n, mask=key_ok, other=0)
    # c_K = sK * softmax scale * log2(e): the per-key factor of S^T (1 past the last token)
    c_k = gl.load(skv_ptr + 2 * offs_n, mask=key_ok, other=1.0) * qk_scale
    dv = gl.zeros([BLOCK_N, HEAD_DIM], gl.float32, layout=dv_layout)
    s_zero = gl.zeros([BLOCK_N, BLOCK_M], gl.float32, layout=s_layout)
    dv_zero = gl.zeros([BLOCK_N, HEAD_DIM], gl.float32, layout=dv_layout)
    mbarrier.wait(kv_bar, kv_phase)
    if PAIR:
        for g in range(G):
            base = ring0 + g * nq - lo  # pair index of (g, m) is base + m
            dv = _dkdv8_p_range(dv, k_smem, q_smem, dot_smem, q_bars, qdo_empty, pt_smem,
                                p_ready, p_free, qrow_smem, r_bars, c_k, offs_n, seg_end_n,
                                s_zero, dv_zero, lo, full_lo, base, True, BLOCK_M, STAGES,
                                s_layout, dv_layout, op_layout)
            dv = _dkdv8_p_range(dv, k_smem, q_smem, dot_smem, q_bars, qdo_empty, pt_smem,
                                p_ready, p_free, qrow_smem, r_bars, c_k, offs_n, seg_end_n,
                                s_zero, dv_zero, full_lo, full_hi, base, False, BLOCK_M, STAGES,
                                s_layout, dv_layout, op_layout)
            dv = _dkdv8_p_range(dv, k_smem, q_smem, dot_smem, q_bars, qdo_empty, pt_smem,
                                p_ready, p_free, qrow_smem, r_bars, c_k, offs_n, seg_end_n,
                                s_zero, dv_zero, full_hi, hi, base, True, BLOCK_M, STAGES,
                                s_layout, dv_layout, op_layout)
    else:
        rows: gl.constexpr = gl.SliceLayout(1, dv_layout)
        if PIPE:  # pair 0 (tile lo of the first query head) without its dV MMA (masked)
            st, lse, _, sq, sdo = _pair_start(k_smem, q_smem, q_bars, qrow_smem, r_bars, s_zero,
                                              ring0, STAGES, s_layout)
            pq, scale = _dkdv8_p_tile(st, lse, sq, sdo, c_k, pt_smem, p_ready, p_free, offs_n,
                                      seg_end_n, lo, ring0, True, BLOCK_M, s_layout)
            p_scale = gl.convert_layout(scale, rows)
        else:  # nothing is carried from step to step (the loops drop what they carry unused)
            pq = s_zero
            p_scale = gl.zeros([BLOCK_N], gl.float32, layout=rows)
        for g in range(G):  # the query heads reading this kv head: no atomics
            base = ring0 + g * nq - lo  # pair index of (g, m) is base + m
            first = lo + (g == 0).to(gl.int32) if PIPE else lo
            # Three loops, no branch inside a step (see _fwd_step).
            for m in range(first, full_lo):
                dv, pq, p_scale = _dkdv8_p_step(
                    dv, pq, p_scale, k_smem, q_smem, dot_smem, q_bars, qdo_empty, pt_smem,
                    p_ready, p_free, qrow_smem, r_bars, c_k, offs_n, seg_end_n, s_zero, dv_zero,
                    m, base + m, True, BLOCK_M, STAGES, PIPE, s_layout, dv_layout, op_layout)
            for m in range(gl.maximum(first, full_lo), full_hi):
                dv, pq, p_scale = _dkdv8_p_step(
                    dv, pq, p_scale, k_smem, q_smem, dot_smem, q_bars, qdo_empty, pt_smem,
                    p_ready, p_free, qrow_smem, r_bars, c_k, offs_n, seg_end_n, s_zero, dv_zero,
                    m, base + m, False, BLOCK_M, STAGES, PIPE, s_layout, dv_layout, op_layout)
            for m in range(gl.maximum(first, full_hi), hi):
                dv, pq, p_scale = _dkdv8_p_step(
                    dv, pq, p_scale, k_smem, q_smem, dot_smem, q_bars, qdo_empty, pt_smem,
                    p_ready, p_free, qrow_smem, r_bars, c_k, offs_n, seg_end_n, s_zero, dv_zero,
                    m, base + m, True, BLOCK_M, STAGES, PIPE, s_layout, dv_layout, op_layout)
        if PIPE:
            dv = _dkdv8_p_mma(dv, pq, p_scale, dot_smem, qdo_empty,
                              (ring0 + G * nq - 1) % STAGES, dv_zero, op_layout)
    if kv_empty is not None:  # every MMA that read K has been waited for
        mbarrier.arrive(kv_empty)
    _store_rows_masked(dv, dv_ptr, start_n, kv_col, total, H_KV * HEAD_DIM, dv_layout)


@gluon.jit
def _dkdv8_ds_rows(v_smem, kv_bar, do_smem, qt_smem, do_bars, qdo_empty, pt_smem, p_ready,
                   p_free, qrow_smem, r_bars, dk_ptr, skv_ptr, total, sm_scale, kv_col, start_n,
                   count, HEAD_DIM: gl.constexpr, H_KV: gl.constexpr, BLOCK_M: gl.constexpr,
                   BLOCK_N: gl.constexpr, STAGES: gl.constexpr, QK_K: gl.constexpr,
                   PIPE: gl.constexpr, PAIR: gl.constexpr = False, G: gl.constexpr = 1,
                   lo=0, full_lo=0, full_hi=0, hi=0, ring0=0, kv_phase=0, kv_empty=None):
    """The dS partition (see DKDV8_CONFIG): dK of keys start_n .. start_n + 63 over the ``count``
    pairs of the ring (one loop: no masking here), scaled by the softmax scale at the end as the
    triton kernel does. PIPE: see _dkdv8_ds_step. PAIR: _dkdv8_ds_pair, on the P partition's
    pairs (G query heads, each with its ranges lo .. full_lo .. full_hi .. hi). ring0,
    kv_phase, kv_empty: the persistent kernel's, as _dkdv8_p_rows' (here for V)."""
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_M, 32])
    dk_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, HEAD_DIM, QK_K])
    op_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=dk_layout,
                                                  k_width=QK_K // 8)
    offs_n = start_n + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, s_layout))
    sv = gl.load(skv_ptr + 2 * offs_n + 1, mask=offs_n < total, other=1.0)
    dk = gl.zeros([BLOCK_N, HEAD_DIM], gl.float32, layout=dk_layout)
    s_zero = gl.zeros([BLOCK_N, BLOCK_M], gl.float32, layout=s_layout)
    dk_zero = gl.zeros([BLOCK_N, HEAD_DIM], gl.float32, layout=dk_layout)
    QK_BF16: gl.constexpr = QK_K == 16
    rows: gl.constexpr = gl.SliceLayout(1, dk_layout)
    mbarrier.wait(kv_bar, kv_phase)
    if PAIR:
        for g in range(G):
            # pair index of (g, m) is base + m, as in the P partition
            base = ring0 + g * (hi - lo) - lo
            dk = _dkdv8_ds_range(dk, v_smem, do_smem, qt_smem, do_bars, qdo_empty, pt_smem,
                                 p_ready, p_free, qrow_smem, r_bars, sv, s_zero, dk_zero,
                                 base + lo, base + full_lo, STAGES, s_layout, dk_layout,
                                 op_layout, QK_BF16)
            dk = _dkdv8_ds_range(dk, v_smem, do_smem, qt_smem, do_bars, qdo_empty, pt_smem,
                                 p_ready, p_free, qrow_smem, r_bars, sv, s_zero, dk_zero,
                                 base + full_lo, base + full_hi, STAGES, s_layout, dk_layout,
                                 op_layout, QK_BF16)
            dk = _dkdv8_ds_range(dk, v_smem, do_smem, qt_smem, do_bars, qdo_empty, pt_smem,
                                 p_ready, p_free, qrow_smem, r_bars, sv, s_zero, dk_zero,
                                 base + full_hi, base + hi, STAGES, s_layout, dk_layout,
                                 op_layout, QK_BF16)
    else:
        if PIPE:  # pair 0 without its dK MMA, which runs in the next step (or after the loop)
            dpt, _, delta, sq, sdo = _pair_start(v_smem, do_smem, do_bars, qrow_smem, r_bars,
                                                 s_zero, ring0, STAGES, s_layout)
            dsq, scale = _dkdv8_ds_tile(dpt, delta, sq, sdo, sv, pt_smem, p_ready, p_free,
                                        ring0, s_layout)
            ds_scale = gl.convert_layout(scale, rows)
        else:  # nothing is carried from step to step (the loop drops what it carries unused)
            dsq = s_zero
            ds_scale = gl.zeros([BLOCK_N], gl.float32, layout=rows)
        for i in range(ring0 + (1 if PIPE else 0), ring0 + count):
            dk, dsq, ds_scale = _dkdv8_ds_step(dk, dsq, ds_scale, v_smem, do_smem, qt_smem,
                                               do_bars, qdo_empty, pt_smem, p_ready, p_free,
                                               qrow_smem, r_bars, sv, s_zero, dk_zero, i, STAGES,
                                               PIPE, s_layout, dk_layout, op_layout, QK_BF16)
        if PIPE:
            dk = _dkdv8_ds_mma(dk, dsq, ds_scale, qt_smem, qdo_empty,
                               (ring0 + count - 1) % STAGES, dk_zero, op_layout, QK_BF16)
    if kv_empty is not None:  # every MMA that read V has been waited for
        mbarrier.arrive(kv_empty)
    _store_rows_masked(dk * sm_scale, dk_ptr, start_n, kv_col, total, H_KV * HEAD_DIM,
                       dk_layout)


@gluon.jit
def _dkdv8_producer(k_desc, v_desc, q_desc, do_desc, qt_desc, dot_desc, qrow_desc, k_smem,
                    v_smem, kv_bar, q_smem, do_smem, qt_smem, dot_smem, qrow_smem, q_bars,
                    do_bars, r_bars, qdo_empty, start_n, kv_col, count, nq, lo, head0,
                    HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, STAGES: gl.constexpr,
                    ring0=0):
    """The TMA producer warp: K and V, then per (query head, query tile) pair j the P
    partition's Q and dO^T tiles (q_bars), the dS partition's dO and Q^T tiles (do_bars) and
    the pair's per-query rows that both read (r_bars) into slot (ring0 + j) % STAGES once both
    partitions have released it (ring0: the persistent kernel's pairs before this work item).
    The token-contiguous copies [H * D, T_pad] are read at [head * D, first token], the rows
    [Hq, T, 4] at [head, first token, 0]."""
    mbarrier.expect(kv_bar, k_desc.block_type.nbytes + v_desc.block_type.nbytes)
    tma_load(k_desc, [start_n, kv_col], kv_bar, k_smem)
    tma_load(v_desc, [start_n, kv_col], kv_bar, v_smem)
    for j in range(count):
        jj = ring0 + j
        slot = jj % STAGES
        mbarrier.wait(qdo_empty.index(slot), ((jj // STAGES) & 1) ^ 1)
        head, row = _pair_coords(j, nq, lo, head0, BLOCK_M)
        col = head * HEAD_DIM
        mbarrier.expect(q_bars.index(slot), q_desc.block_type.nbytes + dot_desc.block_type.nbytes)
        tma_load(q_desc, [row, col], q_bars.index(slot), q_smem.index(slot))
        tma_load(dot_desc, [col, row], q_bars.index(slot), dot_smem.index(slot))
        mbarrier.expect(do_bars.index(slot), do_desc.block_type.nbytes + qt_desc.block_type.nbytes)
        tma_load(do_desc, [row, col], do_bars.index(slot), do_smem.index(slot))
        tma_load(qt_desc, [col, row], do_bars.index(slot), qt_smem.index(slot))
        mbarrier.expect(r_bars.index(slot), qrow_desc.block_type.nbytes)
        tma_load(qrow_desc, [head, row, 0], r_bars.index(slot), qrow_smem.index(slot))


@gluon.jit
def _ring(desc, STAGES: gl.constexpr):
    return gl.allocate_shared_memory(desc.dtype, [STAGES] + desc.block_type.shape, desc.layout)


@gluon.jit
def _barriers(n: gl.constexpr, count: gl.constexpr):
    bars = gl.allocate_shared_memory(gl.int64, [n, 1], mbarrier.MBarrierLayout())
    for j in gl.static_range(n):
        mbarrier.init(bars.index(j), count=count)
    return bars


@gluon.jit
def _dkdv8_ring(q_desc, dot_desc, do_desc, qt_desc, qrow_desc, STAGES: gl.constexpr,
                PT_SLOTS: gl.constexpr, BLOCK_N: gl.constexpr):
    """The FP8 dK/dV kernel's ring of (query head, query tile) pairs, STAGES slots of Q, dO^T's
    token-contiguous copy, dO, Q^T's and the per-query rows, and its PT_SLOTS P^T tiles."""
    q_smem = _ring(q_desc, STAGES)
    dot_smem = _ring(dot_desc, STAGES)
    do_smem = _ring(do_desc, STAGES)
    qt_smem = _ring(qt_desc, STAGES)
    qrow_smem = _ring(qrow_desc, STAGES)
    # Swizzled in 8-element (32-byte) units over 8 rows: no bank conflicts for S^T's accumulator
    # layout, storing or loading (gl.bank_conflicts, triton 3.6: 0 per wavefront; 3 with
    # 2-element units, 1 with the NVMMA layout).
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[0]
    pt_smem = gl.allocate_shared_memory(gl.float32, [PT_SLOTS, BLOCK_N, BLOCK_M],
                                        gl.SwizzledSharedLayout(8, 1, 8, order=[1, 0]))
    return q_smem, dot_smem, do_smem, qt_smem, qrow_smem, pt_smem


@gluon.jit
def _dkdv8_ring_barriers(STAGES: gl.constexpr, PT_SLOTS: gl.constexpr):
    """The ring's barriers: each slot's Q / dO^T loads (q_bars), dO / Q^T loads (do_bars) and
    per-query rows (r_bars) landed, the slot released by both partitions (qdo_empty), and each
    P^T slot's ready and free."""
    return (_barriers(STAGES, 1), _barriers(STAGES, 1), _barriers(STAGES, 1),
            _barriers(STAGES, 2), _barriers(PT_SLOTS, 1), _barriers(PT_SLOTS, 1))


@gluon.jit
def _attn_bwd_dkdv8_hopper_ws_kernel(
    q_desc, k_desc, v_desc, do_desc, qt_desc, dot_desc, qrow_desc, dk_ptr, dv_ptr, skv_ptr,
    seg_end_ptr, order_ptr, stride_skh, total, c, sm_scale, H_Q: gl.constexpr,
    H_KV: gl.constexpr, HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, STAGES: gl.constexpr,
    PIPE: gl.constexpr, CONSUMER_REGS: gl.constexpr, PRODUCER_REGS: gl.constexpr,
    num_warps: gl.constexpr, PAIR: gl.constexpr, PT_SLOTS: gl.constexpr,
):
    """dK = sm_scale * sum of dS'^T Q, dV = sum of P'^T dO over the query tiles (of every query
    head of the GQA group) that see this key tile: kernels.attention._attn_bwd_dkdv_kernel's FP8
    function (PART 0, or PARTs 1 and 2) on its tiles. Grid (Hkv, 64-key tiles in launch order),
    num_warps = 4 (the P partition). Descriptors: q (E4M3, or bf16 for nvfp4_fp8) and do (E4M3)
    over [T, H * D] with BLOCK_M rows, k and v over [T, Hkv * D] with 64 rows, qt and dot over
    the token-contiguous copies [Hq * D, T_pad] with [D, BLOCK_M] blocks, qrow over the per-query
    rows [Hq, T, 4] (lse2, delta, sQ, sdO) with [1, BLOCK_M, 4] blocks; skv [Hkv, T, 2] (sK, sV);
    dk, dv contiguous [T, Hkv, D] bf16."""
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]
    start_n, _, _, kv_col, lo, full_lo, full_hi, hi, nq, count, head0 = _key_program(
        gl.load(order_ptr + gl.program_id(1)), seg_end_ptr, seg_end_ptr, total, H_Q, H_KV,
        HEAD_DIM, BLOCK_M, BLOCK_N, False)
    skv_ptr = skv_ptr + (kv_col // HEAD_DIM) * stride_skh
    k_smem = gl.allocate_shared_memory(k_desc.dtype, k_desc.block_type.shape, k_desc.layout)
    v_smem = gl.allocate_shared_memory(v_desc.dtype, v_desc.block_type.shape, v_desc.layout)
    q_smem, dot_smem, do_smem, qt_smem, qrow_smem, pt_smem = _dkdv8_ring(
        q_desc, dot_desc, do_desc, qt_desc, qrow_desc, STAGES, PT_SLOTS, BLOCK_N)
    kv_bar = _barriers(1, 1)
    q_bars, do_bars, r_bars, qdo_empty, p_ready, p_free = _dkdv8_ring_barriers(STAGES, PT_SLOTS)
    fence_async_shared()
    QK_K: gl.constexpr = 256 // q_desc.dtype.primitive_bitwidth
    gl.warp_specialize([
        (_dkdv8_p_rows, (k_smem, kv_bar.index(0), q_smem, dot_smem, q_bars, qdo_empty, pt_smem,
                         p_ready, p_free, qrow_smem, r_bars, dv_ptr, skv_ptr, seg_end_ptr, total,
                         c, kv_col, start_n, lo, full_lo, full_hi, hi, nq, HEAD_DIM, H_KV,
                         H_Q // H_KV, BLOCK_M, BLOCK_N, STAGES, QK_K, PIPE, PAIR)),
        (_dkdv8_ds_rows, (v_smem, kv_bar.index(0), do_smem, qt_smem, do_bars, qdo_empty,
                          pt_smem, p_ready, p_free, qrow_smem, r_bars, dk_ptr, skv_ptr, total,
                          sm_scale, kv_col, start_n, count, HEAD_DIM, H_KV, BLOCK_M, BLOCK_N,
                          STAGES, QK_K, PIPE, PAIR, H_Q // H_KV, lo, full_lo, full_hi, hi)),
        (_dkdv8_producer, (k_desc, v_desc, q_desc, do_desc, qt_desc, dot_desc, qrow_desc, k_smem,
                           v_smem, kv_bar.index(0), q_smem, do_smem, qt_smem, dot_smem,
                           qrow_smem, q_bars, do_bars, r_bars, qdo_empty, start_n, kv_col, count,
                           nq, lo, head0, HEAD_DIM, BLOCK_M, STAGES)),
    ], [4, 1], [CONSUMER_REGS, PRODUCER_REGS])


# The persistent form (FLAMIA_GLUON_DKDV8=...,persistent; dkdv8_persistent): one program per
# SM takes (kv head, key tile) items from a queue (_take_item), as the BF16 dK/dV kernel does.
# With one 64-key tile per program (8192 programs at 32k tokens and 16 heads) and one program per
# SM (its shared memory), each program's start (K and V, the ring's first tiles) and end (dK and
# dV out) ran with nothing beside them: a least-squares fit over the seven 16-head D = 128
# workloads of the H200 grid of 2026-12-07 18:40 (python -m bench.step_cost,
# bench/results/step_cost_20261207-1840_H200.txt) gives this kernel 1.08 us per unmasked pair,
# 1.38 per masked one and 0.26 ms per call besides (the persistent BF16 dK/dV kernel: 0.05), a
# third of its 0.77 ms at U(32, 1024). Here K and V have two slots, so the next item's K and V
# load while the current item runs, and the ring runs on across items; each item is the plain
# kernel's steps in the same order, so the same bits. Compiled only so far: not yet run on a
# GPU (twenty-sixth session: no machine was lent).
@gluon.jit
def _dkdv8_persistent_p(k_smem, kv_bars, kv_empty, q_smem, dot_smem, q_bars, qdo_empty, pt_smem,
                        p_ready, p_free, qrow_smem, r_bars, dv_ptr, skv_ptr, stride_skh,
                        seg_end_ptr, order_ptr, queue_ptr, item_bars, total, qk_scale,
                        HEAD_DIM: gl.constexpr, H_Q: gl.constexpr, H_KV: gl.constexpr,
                        BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
                        QK_K: gl.constexpr, PIPE: gl.constexpr):
    """The persistent kernel's P partition: _dkdv8_p_rows for each work item, item t's K in
    slot t % 2."""
    ring0 = 0  # the ring's pairs consumed before this work item
    t = 0  # work items before this one
    w = _read_item(queue_ptr, item_bars, t)
    while w >= 0:
        start_n, _, _, kv_col, lo, full_lo, full_hi, hi, nq, count, _ = _key_item(
            w, order_ptr, seg_end_ptr, seg_end_ptr, total, H_Q, H_KV, HEAD_DIM, BLOCK_M, BLOCK_N)
        _dkdv8_p_rows(k_smem.index(t % 2), kv_bars.index(t % 2), q_smem, dot_smem, q_bars,
                      qdo_empty, pt_smem, p_ready, p_free, qrow_smem, r_bars, dv_ptr,
                      skv_ptr + (kv_col // HEAD_DIM) * stride_skh, seg_end_ptr, total, qk_scale,
                      kv_col, start_n, lo, full_lo, full_hi, hi, nq, HEAD_DIM, H_KV, H_Q // H_KV,
                      BLOCK_M, BLOCK_N, STAGES, QK_K, PIPE, False, ring0, (t // 2) & 1,
                      kv_empty.index(t % 2))
        ring0 += count
        t += 1
        w = _read_item(queue_ptr, item_bars, t)


@gluon.jit
def _dkdv8_persistent_ds(v_smem, kv_bars, kv_empty, do_smem, qt_smem, do_bars, qdo_empty,
                         pt_smem, p_ready, p_free, qrow_smem, r_bars, dk_ptr, skv_ptr,
                         stride_skh, seg_end_ptr, order_ptr, queue_ptr, item_bars, total,
                         sm_scale, HEAD_DIM: gl.constexpr, H_Q: gl.constexpr, H_KV: gl.constexpr,
                         BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
                         QK_K: gl.constexpr, PIPE: gl.constexpr):
    """The persistent kernel's dS partition: _dkdv8_ds_rows for each work item, item t's V in
    slot t % 2."""
    ring0 = 0
    t = 0
    w = _read_item(queue_ptr, item_bars, t)
    while w >= 0:
        start_n, _, _, kv_col, _, _, _, _, _, count, _ = _key_item(
            w, order_ptr, seg_end_ptr, seg_end_ptr, total, H_Q, H_KV, HEAD_DIM, BLOCK_M, BLOCK_N)
        _dkdv8_ds_rows(v_smem.index(t % 2), kv_bars.index(t % 2), do_smem, qt_smem, do_bars,
                       qdo_empty, pt_smem, p_ready, p_free, qrow_smem, r_bars, dk_ptr,
                       skv_ptr + (kv_col // HEAD_DIM) * stride_skh, total, sm_scale, kv_col,
                       start_n, count, HEAD_DIM, H_KV, BLOCK_M, BLOCK_N, STAGES, QK_K, PIPE,
                       False, 1, 0, 0, 0, 0, ring0, (t // 2) & 1, kv_empty.index(t % 2))
        ring0 += count
        t += 1
        w = _read_item(queue_ptr, item_bars, t)


@gluon.jit
def _dkdv8_persistent_producer(k_desc, v_desc, q_desc, do_desc, qt_desc, dot_desc, qrow_desc,
                               k_smem, v_smem, kv_bars, kv_empty, q_smem, do_smem, qt_smem,
                               dot_smem, qrow_smem, q_bars, do_bars, r_bars, qdo_empty,
                               seg_end_ptr, order_ptr, queue_ptr, item_bars, total, n_work,
                               HEAD_DIM: gl.constexpr, H_Q: gl.constexpr, H_KV: gl.constexpr,
                               BLOCK_M: gl.constexpr, STAGES: gl.constexpr):
    """The persistent kernel's producer warp: _dkdv8_producer for each work item it takes from
    the queue. It takes item t once both partitions are done with item t - 2 (kv_empty of slot
    t % 2): then that item's K/V slot is free, and so is its number's slot of the queue, which
    they read before starting it (_take_item)."""
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]
    ring0 = 0
    t = 0
    w = _take_item(queue_ptr, item_bars, t, n_work)
    while w >= 0:
        start_n, _, _, kv_col, lo, _, _, _, nq, count, head0 = _key_item(
            w, order_ptr, seg_end_ptr, seg_end_ptr, total, H_Q, H_KV, HEAD_DIM, BLOCK_M, BLOCK_N)
        _dkdv8_producer(k_desc, v_desc, q_desc, do_desc, qt_desc, dot_desc, qrow_desc,
                        k_smem.index(t % 2), v_smem.index(t % 2), kv_bars.index(t % 2), q_smem,
                        do_smem, qt_smem, dot_smem, qrow_smem, q_bars, do_bars, r_bars,
                        qdo_empty, start_n, kv_col, count, nq, lo, head0, HEAD_DIM, BLOCK_M,
                        STAGES, ring0)
        ring0 += count
        t += 1
        # A fresh mbarrier counts as having completed the phase before its first: items 0 and
        # 1 wait for nothing.
        mbarrier.wait(kv_empty.index(t % 2), ((t // 2) & 1) ^ 1)
        w = _take_item(queue_ptr, item_bars, t, n_work)


@gluon.jit
def _attn_bwd_dkdv8_hopper_persistent_kernel(
    q_desc, k_desc, v_desc, do_desc, qt_desc, dot_desc, qrow_desc, dk_ptr, dv_ptr, skv_ptr,
    seg_end_ptr, order_ptr, queue_ptr, stride_skh, total, c, sm_scale, n_work,
    H_Q: gl.constexpr, H_KV: gl.constexpr, HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr,
    STAGES: gl.constexpr, PIPE: gl.constexpr, CONSUMER_REGS: gl.constexpr,
    PRODUCER_REGS: gl.constexpr, num_warps: gl.constexpr, PT_SLOTS: gl.constexpr,
):
    """_attn_bwd_dkdv8_hopper_ws_kernel's function, persistent: grid (programs,), at most one
    per SM; n_work = Hkv x key tiles, item w the key tile order[w // Hkv] of kv head w % Hkv
    (the plain kernel's launch order); queue_ptr: int32 [1 + 2 x programs], zero (_take_item).
    Arguments otherwise as the plain kernel's (no pair steps). Shared memory at D = 128 with 3
    ring slots: 163 KB (K and V 2 x 16 KB, the ring 3 x 33 KB, P^T 2 x 16 KB)."""
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]
    k_smem = _ring(k_desc, 2)
    v_smem = _ring(v_desc, 2)
    q_smem, dot_smem, do_smem, qt_smem, qrow_smem, pt_smem = _dkdv8_ring(
        q_desc, dot_desc, do_desc, qt_desc, qrow_desc, STAGES, PT_SLOTS, BLOCK_N)
    kv_bars = _barriers(2, 1)
    kv_empty = _barriers(2, 2)  # both partitions' arrivals: done with the slot's K and V
    item_bars = _barriers(2, 1)
    q_bars, do_bars, r_bars, qdo_empty, p_ready, p_free = _dkdv8_ring_barriers(STAGES, PT_SLOTS)
    fence_async_shared()
    QK_K: gl.constexpr = 256 // q_desc.dtype.primitive_bitwidth
    gl.warp_specialize([
        (_dkdv8_persistent_p, (k_smem, kv_bars, kv_empty, q_smem, dot_smem, q_bars, qdo_empty,
                               pt_smem, p_ready, p_free, qrow_smem, r_bars, dv_ptr, skv_ptr,
                               stride_skh, seg_end_ptr, order_ptr, queue_ptr, item_bars, total,
                               c, HEAD_DIM, H_Q, H_KV, BLOCK_M, BLOCK_N, STAGES, QK_K, PIPE)),
        (_dkdv8_persistent_ds, (v_smem, kv_bars, kv_empty, do_smem, qt_smem, do_bars, qdo_empty,
                                pt_smem, p_ready, p_free, qrow_smem, r_bars, dk_ptr, skv_ptr,
                                stride_skh, seg_end_ptr, order_ptr, queue_ptr, item_bars, total,
                                sm_scale, HEAD_DIM, H_Q, H_KV, BLOCK_M, BLOCK_N, STAGES, QK_K,
                                PIPE)),
        (_dkdv8_persistent_producer, (k_desc, v_desc, q_desc, do_desc, qt_desc, dot_desc,
                                      qrow_desc, k_smem, v_smem, kv_bars, kv_empty, q_smem,
                                      do_smem, qt_smem, dot_smem, qrow_smem, q_bars, do_bars,
                                      r_bars, qdo_empty, seg_end_ptr, order_ptr, queue_ptr,
                                      item_bars, total, n_work, HEAD_DIM, H_Q, H_KV, BLOCK_M,
                                      STAGES)),
    ], [4, 1], [CONSUMER_REGS, PRODUCER_REGS])


FP8 = torch.float8_e4m3fn
GL_DTYPES = {torch.bfloat16: gl.bfloat16, torch.float8_e4m3fn: gl.float8e4nv,
             torch.float32: gl.float32}


@functools.lru_cache(maxsize=None)
def _tile_layout(*shape_and_dtype):
    """The shared layout of a TMA block: _tile_layout(rows, cols[, dtype]) or
    _tile_layout(1, rows, cols, dtype) for a 3D block; dtype defaults to bfloat16. Cached:
    building it costs ~15 us of host time per descriptor (cProfile on the H200)."""
    *shape, dtype = shape_and_dtype if isinstance(shape_and_dtype[-1], torch.dtype) else (
        *shape_and_dtype, torch.bfloat16)
    return gl.NVMMASharedLayout.get_default_for(list(shape), GL_DTYPES[dtype])


def _work_queue(programs: int, device) -> torch.Tensor:
    """The work queue of one persistent launch (_take_item): the next item's number, then two
    slots per program, zero. A fresh one per launch: a queue shared by launches on two streams
    would hand items of one to the other."""
    return torch.zeros(1 + 2 * programs, dtype=torch.int32, device=device)


# TensorDescriptor's fields that have defaults (triton 3.6: padding; 3.9 adds round_f32_to_tf32)
_DESCRIPTOR_DEFAULTS = {f.name: f.default for f in dataclasses.fields(TensorDescriptor)
                        if f.default is not dataclasses.MISSING}


def _rows_view(t: torch.Tensor, block_rows: int) -> TensorDescriptor:
    """A TMA descriptor over [T, H, D] seen as [T, H * D] (heads adjacent: stride(1) == D),
    block [block_rows, D]. Built without TensorDescriptor's checks (__post_init__: 1.7 us of
    host time each with triton 3.6, 16 descriptors per BF16 fwd+bwd): what they check, supports()
    checked for the inputs (16-byte aligned base and token stride, contiguous head dim), and the
    outputs are contiguous tensors of this module's callers."""
    total, h, d = t.shape
    desc = object.__new__(TensorDescriptor)
    desc.__dict__.update(_DESCRIPTOR_DEFAULTS, base=t, shape=[total, h * d],
                         strides=[t.stride(0), 1], block_shape=[block_rows, d],
                         layout=_tile_layout(block_rows, d, t.dtype))
    return desc


def _token_major_view(t: torch.Tensor, block_tokens: int) -> TensorDescriptor:
    """A TMA descriptor over a token-contiguous copy [H, D, T_pad] (quantize.token_major_copy)
    seen as [H * D, T_pad], block [D, block_tokens]."""
    h, d, padded = t.shape
    return TensorDescriptor(t, [h * d, padded], [t.stride(1), 1], [d, block_tokens],
                            _tile_layout(d, block_tokens, t.dtype))


def _vector_view(t: torch.Tensor, block: int) -> TensorDescriptor:
    """A TMA descriptor over a per-query fp32 array [Hq, T] (unit stride along T, the row stride
    a multiple of 4), block [1, block]: a tile past the last token reads zeros."""
    h, total = t.shape
    return TensorDescriptor(t, [h, total], [t.stride(0), 1], [1, block],
                            _tile_layout(1, block, torch.float32))


def _query_rows_view(qrow: torch.Tensor, block_m: int) -> TensorDescriptor:
    """A TMA descriptor over the per-query rows [Hq, T, 4] (fp32, contiguous), block
    [1, block_m, 4]: a tile past the last token reads zeros, as the triton kernels' masked loads
    do."""
    h, total, fields = qrow.shape
    return TensorDescriptor(qrow, [h, total, fields], [total * fields, fields, 1],
                            [1, block_m, fields], _tile_layout(1, block_m, fields, torch.float32))


def supports(fp8: tuple[str, ...] = (), **tensors: torch.Tensor) -> str | None:
    """None if the Gluon kernels can take these [T, H, D] inputs (by name: q, k, v, do), else
    why not. ``fp8``: the names that may also be E4M3 (float8_e4m3fn) rather than bfloat16."""
    # Called once per launch: kernels.attention asks, then passes checked=True to the launcher
    first = next(iter(tensors.values()))
    if cuda_major(first.device) != 9:
        return "the Gluon kernels need a GPU of compute capability 9.x (Hopper)"
    for name, t in tensors.items():
        if t.dtype is not torch.bfloat16 and (name not in fp8 or t.dtype is not FP8):
            dtypes = (torch.bfloat16, FP8) if name in fp8 else (torch.bfloat16, )
            return f"{name} must be {' or '.join(map(str, dtypes))}, got {t.dtype}"
        strides = t.stride()
        if strides[2] != 1 or strides[1] != t.shape[2]:
            return (f"{name} needs heads adjacent and a contiguous head dim (strides (*, D, 1)) "
                    f"for its TMA descriptor, got strides {strides}")
        if (strides[0] * t.element_size()) % 16 or t.data_ptr() % 16:
            return f"{name} needs a 16-byte aligned base and token stride, got {strides}"
    if first.shape[2] not in (64, 128):
        return f"head dim {first.shape[2]}; accepted: 64, 128"
    return None


def attention_fwd_hopper(q, k, v, seg_start, order_fwd, softmax_scale, o, lse, seg_end=None,
                         doc_tiles=False, short_docs=False, checked=False):
    """Writes O [T, Hq, D] bf16 and lse2 [Hq, T] float32 (allocated by the caller,
    kernels.attention.attention_fwd), as the triton BF16 forward does; order_fwd: launch order
    of the query tiles of config(short_docs)'s BLOCK_M (doc_tiles: their first rows, see
    kernels.attention.doc_tiles; seg_end needed). checked: the caller has just had supports()
    accept these inputs (one host check less)."""
    why = None if checked else supports(q=q, k=k, v=v)
    if why is not None:
        raise ValueError(why)
    total, hq, d = q.shape
    assert o.shape == q.shape and o.is_contiguous(), "o: contiguous [T, Hq, D]"
    assert lse.shape == (hq, total) and lse.stride(1) == 1, "lse: [Hq, T], unit stride along T"
    (block_m, block_n, warps, stages), mode = _fwd_setting(short_docs, doc_tiles)
    grid = (hq, order_fwd.numel())
    seg_end = _seg_end(seg_end, doc_tiles, seg_start)
    if mode == "persistent":
        if doc_tiles:
            raise ValueError("the persistent forward (FLAMIA_GLUON_FWD=...,persistent) runs grid "
                             "tiles only; unset FLAMIA_TILES=doc or choose another forward")
        if stages > PERSISTENT_MAX_STAGES[d]:
            raise ValueError(f"FLAMIA_GLUON_FWD={os.environ.get('FLAMIA_GLUON_FWD')!r}: the "
                             f"persistent forward at D = {d} takes at most "
                             f"{PERSISTENT_MAX_STAGES[d]} ring slots (S; with its Q and O tiles "
                             "more exceed the shared memory)")
        half, n_work = block_m // 2, hq * order_fwd.numel()
        programs = min(n_work, sm_count(q.device))
        launch(_attn_fwd_hopper_persistent_kernel, (programs, ),
            _rows_view(q, half), _rows_view(k, block_n), _rows_view(v, block_n),
            _rows_view(o, half), o, lse, seg_start, order_fwd, _work_queue(programs, q.device),
            lse.stride(0), total,
            softmax_scale * LOG2E, n_work, H_Q=hq, H_KV=k.shape[1], HEAD_DIM=d,
            BLOCK_N=block_n, STAGES=stages, CONSUMER_REGS=WS_CONSUMER_REGS,
            PRODUCER_REGS=WS_PRODUCER_REGS, num_warps=4)
        return o, lse
    if mode:
        half = block_m // 2
        launch(_attn_fwd_hopper_ws_kernel, grid,
            _rows_view(q, half), _rows_view(k, block_n), _rows_view(v, block_n),
            _rows_view(o, half), o, lse, seg_start, seg_end, order_fwd, lse.stride(0), total,
            softmax_scale * LOG2E, H_Q=hq, H_KV=k.shape[1], HEAD_DIM=d, BLOCK_N=block_n,
            STAGES=stages, PINGPONG=mode == "pingpong", CONSUMER_REGS=WS_CONSUMER_REGS,
            PRODUCER_REGS=WS_PRODUCER_REGS, DOC_TILES=doc_tiles, num_warps=4)
        return o, lse
    launch(_attn_fwd_hopper_kernel, grid,
        _rows_view(q, block_m), _rows_view(k, block_n), _rows_view(v, block_n),
        _rows_view(o, block_m), o, lse, seg_start, seg_end, order_fwd, lse.stride(0), total,
        softmax_scale * LOG2E, H_Q=hq, H_KV=k.shape[1], HEAD_DIM=d, BLOCK_M=block_m,
        BLOCK_N=block_n, STAGES=stages, DOC_TILES=doc_tiles, num_warps=warps)
    return o, lse


def _seg_end(seg_end, doc_tiles, seg_start):
    """The per-token segment ends a doc-tile launch reads. Grid tiles read none, but the launcher
    still takes a device pointer: seg_start stands in (a CPU tensor is refused at launch)."""
    if seg_end is None:
        if doc_tiles:
            raise ValueError("doc tiles (FLAMIA_TILES=doc) need seg_end")
        return seg_start
    return seg_end


def attention_fwd8_hopper(q8, k8, vt8, sq, skv, seg_start, order_fwd, softmax_scale, o, lse):
    """The FP8 forward (_attn_fwd8_hopper_ws_kernel): writes O [T, Hq, D] bf16 and lse2 [Hq, T]
    float32 (caller-allocated) as the triton FP8 forward does (kernels.attention.attention_fwd's
    ``fp8`` arguments: q8, k8 E4M3 [T, H, D], or bf16 holding nvfp4_fp8's NVFP4 values; vt8
    V's E4M3 token-contiguous copy [Hkv, D, T_pad]; sq [Hq, T], skv [Hkv, T, 2]); order_fwd:
    launch order of FWD8_CONFIG[0]-query tiles."""
    why = supports(fp8=("q", "k"), q=q8, k=k8)
    if why is None and q8.dtype != k8.dtype:
        why = f"q and k must have one dtype, got {q8.dtype} and {k8.dtype}"
    if why is None and (vt8.dtype != torch.float8_e4m3fn or vt8.stride(2) != 1
                        or vt8.stride(1) % 16 or vt8.shape[:2] != (k8.shape[1], k8.shape[2])):
        why = (f"vt must be V's E4M3 token-contiguous copy [Hkv, D, T_pad] (T_pad a multiple of "
               f"16), got {vt8.dtype} {tuple(vt8.shape)} strides {vt8.stride()}")
    if why is not None:
        raise ValueError(why)
    total, hq, d = q8.shape
    hkv = k8.shape[1]
    assert o.shape == q8.shape and o.is_contiguous() and o.dtype == torch.bfloat16
    assert lse.shape == (hq, total) and lse.stride(1) == 1, "lse: [Hq, T], unit stride along T"
    assert sq.shape == (hq, total) and sq.stride(1) == 1, "sq: [Hq, T], unit stride along T"
    assert skv.shape == (hkv, total, 2) and skv.is_contiguous(), "skv: contiguous [Hkv, T, 2]"
    block_m, block_n, _, stages = FWD8_CONFIG
    mode = fwd8_mode()
    half = block_m // 2
    launch(_attn_fwd8_hopper_ws_kernel, (hq, order_fwd.numel()),
        _rows_view(q8, half), _rows_view(k8, block_n), _token_major_view(vt8, block_n),
        _rows_view(o, half), sq, skv, lse, seg_start, order_fwd, sq.stride(0), skv.stride(0),
        lse.stride(0), total, softmax_scale * LOG2E, H_Q=hq, H_KV=hkv, HEAD_DIM=d,
        BLOCK_N=block_n, STAGES=stages, CONSUMER_REGS=FWD8_CONSUMER_REGS,
        PRODUCER_REGS=FWD8_PRODUCER_REGS, OVERLAP=mode == "overlap", num_warps=4)
    return o, lse


def attention_dq_hopper(q, k, v, do, lse, delta, seg_start, order_dq, softmax_scale, dq,
                        seg_end=None, doc_tiles=False, o=None, checked=False):
    """Writes dQ (bf16, caller-allocated, contiguous) as kernels.attention's dQ kernel does;
    lse2, delta: [Hq, T] float32 with unit stride along T; order_dq: launch order of the
    DQ_CONFIG[0]-query tiles (doc_tiles: see attention_fwd_hopper). With ``o`` (the forward's
    output, contiguous [T, Hq, D]): also computes delta = rowsum(dO * O) and writes it into
    ``delta`` (the delta kernel's bits, _row_delta) instead of reading it. checked: as in
    attention_fwd_hopper."""
    why = None if checked else supports(q=q, k=k, v=v, do=do)
    if why is not None:
        raise ValueError(why)
    total, hq, d = q.shape
    assert dq.shape == q.shape and dq.is_contiguous(), "dq: contiguous [T, Hq, D]"
    assert lse.stride(1) == 1 and delta.stride(1) == 1 and lse.stride(0) == delta.stride(0)
    fuse_delta = o is not None
    if fuse_delta:
        assert o.shape == q.shape and o.is_contiguous(), "o: contiguous [T, Hq, D]"
    block_m, block_n, warps, stages = DQ_CONFIG
    # O's rows as dO's: 64-row blocks (one per consumer) but in the plain kernel
    mode = dq_mode(doc_tiles)
    o_desc = _rows_view(o, block_m // (1 if mode == "plain" else 2)) if fuse_delta else None
    seg_end = _seg_end(seg_end, doc_tiles, seg_start)
    if mode == "persistent":
        if doc_tiles:
            raise ValueError("the persistent dQ kernel (FLAMIA_GLUON_DQ=persistent) runs grid "
                             "tiles only; unset FLAMIA_TILES=doc or choose another dQ kernel")
        half, n_work = block_m // 2, hq * order_dq.numel()
        programs = min(n_work, sm_count(q.device))
        launch(_attn_bwd_dq_hopper_persistent_kernel, (programs, ),
            _rows_view(q, half), _rows_view(k, block_n), _rows_view(v, block_n),
            _rows_view(do, half), _rows_view(dq, half), o_desc, dq, lse, delta, seg_start,
            order_dq, _work_queue(programs, q.device), lse.stride(0), total,
            softmax_scale * LOG2E, softmax_scale, n_work, H_Q=hq, H_KV=k.shape[1], HEAD_DIM=d,
            BLOCK_N=block_n, STAGES=stages, CONSUMER_REGS=DQ_WS_CONSUMER_REGS,
            PRODUCER_REGS=DQ_WS_PRODUCER_REGS, FUSE_DELTA=fuse_delta, num_warps=4)
        return dq
    if mode == "ws":
        half = block_m // 2
        launch(_attn_bwd_dq_hopper_ws_kernel, (hq, order_dq.numel()),
            _rows_view(q, half), _rows_view(k, block_n), _rows_view(v, block_n),
            _rows_view(do, half), _rows_view(dq, half), o_desc, dq, lse, delta, seg_start,
            seg_end, order_dq, lse.stride(0), total, softmax_scale * LOG2E, softmax_scale,
            H_Q=hq, H_KV=k.shape[1], HEAD_DIM=d, BLOCK_N=block_n, STAGES=stages,
            CONSUMER_REGS=DQ_WS_CONSUMER_REGS, PRODUCER_REGS=DQ_WS_PRODUCER_REGS,
            DOC_TILES=doc_tiles, FUSE_DELTA=fuse_delta, num_warps=4)
        return dq
    launch(_attn_bwd_dq_hopper_kernel, (hq, order_dq.numel()),
        _rows_view(q, block_m), _rows_view(k, block_n), _rows_view(v, block_n),
        _rows_view(do, block_m), _rows_view(dq, block_m), o_desc, dq, lse, delta, seg_start,
        seg_end, order_dq, lse.stride(0), total, softmax_scale * LOG2E, softmax_scale, H_Q=hq,
        H_KV=k.shape[1], HEAD_DIM=d, BLOCK_M=block_m, BLOCK_N=block_n, STAGES=stages,
        DOC_TILES=doc_tiles, FUSE_DELTA=fuse_delta, num_warps=warps)
    return dq


def attention_dkdv_hopper(q, k, v, do, lse, delta, seg_start, seg_end, order_dkdv,
                          softmax_scale, dk, dv, dqa=None, sem=None, doc_tiles=False,
                          checked=False):
    """Writes dK, dV (bf16, caller-allocated, contiguous [T, Hkv, D]) as kernels.attention's BF16
    dK/dV kernel does; lse2, delta: [Hq, T] float32 with unit stride along T; order_dkdv: launch
    order of the DKDV_CONFIG[1]-key tiles. With ``dqa`` (fp32 [T, Hq, D], contiguous, zeroed)
    and ``sem`` (int32 [Hq, >= cdiv(T, DKDV_CONFIG[0])], zeroed): also adds dS K (dQ before
    the softmax scale) into dqa, in key-tile order (FLAMIA_DQ=fused; order_dkdv must then be
    ops._ordered_longest_first's). doc_tiles (kernels.attention.doc_tiles): order_dkdv holds
    the key tiles' first keys; the warp-specialized kernel only. Which kernel: dkdv_pipeline
    and dkdv_persistent (grid tiles: the persistent one by default). checked: as in
    attention_fwd_hopper."""
    why = None if checked else supports(q=q, k=k, v=v, do=do)
    if why is not None:
        raise ValueError(why)
    total, hq, d = q.shape
    assert dk.shape == dv.shape == k.shape and dk.is_contiguous() and dv.is_contiguous()
    assert lse.stride(1) == 1 and delta.stride(1) == 1 and lse.stride(0) == delta.stride(0)
    block_m, block_n, warps, _ = DKDV_CONFIG
    fuse_dq = dqa is not None
    stages, defer, unordered, ws = dkdv_pipeline(fuse_dq)
    if doc_tiles and not ws:
        raise ValueError("doc tiles (FLAMIA_TILES=doc) run with the warp-specialized dK/dV "
                         "kernel; accepted with them: FLAMIA_GLUON_DKDV unset or S,0,ws")
    if ws:
        if fuse_dq:
            raise ValueError("FLAMIA_GLUON_DKDV=...,ws does not add dQ (FLAMIA_DQ=fused); "
                             "accepted with it: FLAMIA_DQ=separate")
        half = block_n // 2
        lse_tma = dkdv_lse_mode() == "tma" and lse.stride(0) % 4 == 0 and not doc_tiles
        lse_descs = ((_vector_view(lse, block_m), _vector_view(delta, block_m)) if lse_tma else
                     (None, None))
        if dkdv_persistent(doc_tiles):
            if doc_tiles:
                raise ValueError("the persistent dK/dV kernel (FLAMIA_GLUON_DKDV=S,0,persistent) "
                                 "runs grid tiles only; unset FLAMIA_TILES=doc or choose another "
                                 "dK/dV kernel")
            n_work = k.shape[1] * order_dkdv.numel()
            programs = min(n_work, sm_count(q.device))
            launch(_attn_bwd_dkdv_hopper_persistent_kernel, (programs, ),
                _rows_view(q, block_m), _rows_view(k, half), _rows_view(v, half),
                _rows_view(do, block_m), _rows_view(dk, half), _rows_view(dv, half), lse, delta,
                *lse_descs, seg_end, order_dkdv, seg_start, _work_queue(programs, q.device),
                lse.stride(0), total, softmax_scale * LOG2E, softmax_scale, n_work, H_Q=hq,
                H_KV=k.shape[1], HEAD_DIM=d, BLOCK_M=block_m, STAGES=stages, LSE_TMA=lse_tma,
                CONSUMER_REGS=DKDV_WS_CONSUMER_REGS, PRODUCER_REGS=DKDV_WS_PRODUCER_REGS,
                num_warps=4)
            return dk, dv
        launch(_attn_bwd_dkdv_hopper_ws_kernel, (k.shape[1], order_dkdv.numel()),
            _rows_view(q, block_m), _rows_view(k, half), _rows_view(v, half),
            _rows_view(do, block_m), _rows_view(dk, half), _rows_view(dv, half), dk, dv, lse,
            delta, *lse_descs, seg_end, order_dkdv, seg_start, lse.stride(0), total,
            softmax_scale * LOG2E, softmax_scale, H_Q=hq, H_KV=k.shape[1], HEAD_DIM=d,
            BLOCK_M=block_m, STAGES=stages, LSE_TMA=lse_tma, CONSUMER_REGS=DKDV_WS_CONSUMER_REGS,
            PRODUCER_REGS=DKDV_WS_PRODUCER_REGS, DOC_TILES=doc_tiles, num_warps=4)
        return dk, dv
    if fuse_dq:
        assert dqa.shape == q.shape and dqa.is_contiguous() and dqa.dtype == torch.float32
        assert sem.dim() == 2 and sem.shape[1] >= -(-total // block_m) and sem.is_contiguous()
    else:
        dqa, sem = lse, seg_end  # unused
    launch(_attn_bwd_dkdv_hopper_kernel, (k.shape[1], order_dkdv.numel()),
        _rows_view(q, block_m), _rows_view(k, block_n), _rows_view(v, block_n),
        _rows_view(do, block_m), _rows_view(dk, block_n), _rows_view(dv, block_n), lse, delta,
        seg_end, order_dkdv, dqa, sem, seg_start, sem.stride(0), lse.stride(0), total,
        softmax_scale * LOG2E, softmax_scale, H_Q=hq, H_KV=k.shape[1], HEAD_DIM=d,
        BLOCK_M=block_m, BLOCK_N=block_n, STAGES=stages, DEFER=defer, FUSE_DQ=fuse_dq,
        ORDERED=not unordered, num_warps=warps)
    return dk, dv


def dkdv8_supports(q8, k8, v8, do8, qt, dot) -> str | None:
    """None if the FP8 dK/dV kernel (attention_dkdv8_hopper) can take these inputs, else why not."""
    why = supports(fp8=("q", "k", "v", "do"), q=q8, k=k8, v=v8, do=do8)
    if why is None and q8.dtype != k8.dtype:
        why = f"q and k must have one dtype, got {q8.dtype} and {k8.dtype}"
    if why is None and torch.bfloat16 in (v8.dtype, do8.dtype):
        why = f"v and do must be torch.float8_e4m3fn, got {v8.dtype} and {do8.dtype}"
    total, hq, d = q8.shape
    for name, t, dtype, heads in (("qt", qt, q8.dtype, hq), ("dot", dot, do8.dtype, hq)):
        if why is None and (t.dtype != dtype or t.shape[:2] != (heads, d) or t.stride(2) != 1
                            or t.stride(0) != d * t.stride(1) or t.stride(1) % 16
                            or t.shape[2] < total):
            why = (f"{name} must be a token-contiguous copy [H, D, T_pad] in {dtype} (contiguous "
                   f"heads, T_pad >= T a multiple of 16), got {t.dtype} {tuple(t.shape)} "
                   f"strides {t.stride()}")
    return why


def attention_dkdv8_hopper(q8, k8, v8, do8, qt, dot, qrow, skv, seg_end, order_dkdv,
                           softmax_scale, dk, dv, checked=False):
    """The FP8 dK/dV kernel (_attn_bwd_dkdv8_hopper_ws_kernel, or its persistent form,
    dkdv8_persistent): writes dK, dV (bf16,
    caller-allocated, contiguous [T, Hkv, D]) as the triton FP8 dK/dV kernels do, from
    kernels.attention.attention_bwd's FP8 arguments: q8, k8 (E4M3, or bf16 holding
    nvfp4_fp8's NVFP4 values), v8, do8 (E4M3) [T, H, D]; qt (Q's dtype) and dot (E4M3) the
    token-contiguous copies [Hq, D, T_pad]; qrow [Hq, T, 4] (lse2, delta, sQ, sdO, the delta
    kernel's) and skv [Hkv, T, 2]; order_dkdv: launch order of DKDV8_CONFIG[1]-key tiles.
    checked: the caller has just had dkdv8_supports accept these inputs (one host check less)."""
    why = None if checked else dkdv8_supports(q8, k8, v8, do8, qt, dot)
    if why is not None:
        raise ValueError(why)
    total, hq, d = q8.shape
    hkv = k8.shape[1]
    assert dk.shape == dv.shape == k8.shape and dk.is_contiguous() and dv.is_contiguous()
    assert dk.dtype == dv.dtype == torch.bfloat16, "dk, dv: bf16"
    assert qrow.shape == (hq, total, 4) and qrow.is_contiguous(), "qrow: contiguous [Hq, T, 4]"
    assert skv.shape == (hkv, total, 2) and skv.is_contiguous(), "skv: contiguous [Hkv, T, 2]"
    block_m, block_n, _ = DKDV8_CONFIG
    stages, schedule, pt_slots = dkdv8_setting(q8.dtype)
    if dkdv8_persistent():
        if schedule == "pair":
            raise ValueError(f"FLAMIA_GLUON_DKDV8={os.environ.get('FLAMIA_GLUON_DKDV8')!r}: the "
                             "persistent FP8 dK/dV kernel runs the wait and pipe schedules, not "
                             "pair steps; accepted: e.g. 3,pipe,persistent or 2,persistent")
        n_work = hkv * order_dkdv.numel()
        programs = min(n_work, sm_count(q8.device))
        launch(_attn_bwd_dkdv8_hopper_persistent_kernel, (programs, ),
            _rows_view(q8, block_m), _rows_view(k8, block_n), _rows_view(v8, block_n),
            _rows_view(do8, block_m), _token_major_view(qt, block_m),
            _token_major_view(dot, block_m), _query_rows_view(qrow, block_m), dk, dv, skv,
            seg_end, order_dkdv, _work_queue(programs, q8.device), skv.stride(0), total,
            softmax_scale * LOG2E, softmax_scale, n_work, H_Q=hq, H_KV=hkv, HEAD_DIM=d,
            BLOCK_M=block_m, STAGES=stages, PIPE=schedule == "pipe", PT_SLOTS=pt_slots,
            CONSUMER_REGS=DKDV8_CONSUMER_REGS, PRODUCER_REGS=DKDV8_PRODUCER_REGS, num_warps=4)
        return dk, dv
    launch(_attn_bwd_dkdv8_hopper_ws_kernel, (hkv, order_dkdv.numel()),
        _rows_view(q8, block_m), _rows_view(k8, block_n), _rows_view(v8, block_n),
        _rows_view(do8, block_m), _token_major_view(qt, block_m), _token_major_view(dot, block_m),
        _query_rows_view(qrow, block_m), dk, dv, skv, seg_end, order_dkdv, skv.stride(0), total,
        softmax_scale * LOG2E, softmax_scale, H_Q=hq, H_KV=hkv, HEAD_DIM=d, BLOCK_M=block_m,
        STAGES=stages, PIPE=schedule == "pipe", PAIR=schedule == "pair", PT_SLOTS=pt_slots,
        CONSUMER_REGS=DKDV8_CONSUMER_REGS,
        PRODUCER_REGS=DKDV8_PRODUCER_REGS, num_warps=4)
    return dk, dv
