"""Triton packed-document attention (varlen layout), forward and backward: the BF16 recipe and,
through the IS_FP8 constexpr variants, the FP8 recipes (mxfp8, nvfp4_fp8, and fp8_rowwise, whose
fp32 per-token scales take the same code: per-token scales are fp32 factors here, never assumed
to be powers of two outside the MX MMA mode).

Algorithm: FlashAttention-2. Forward: online softmax over key tiles, LSE saved. Backward: a
dK/dV kernel over key tiles (looping over the query tiles that see them and over the query
heads of a GQA group, so no atomics) and a dQ kernel over query tiles (BF16 can instead add dQ
from the dK/dV kernel in a fixed order, FLAMIA_DQ=fused, see dq_fused). The FP8 recipes run the
dK/dV kernel twice by default, as a dV-only and a dK-only kernel (PART, see dkdv_parts): with
both fp32 accumulators the FP8 kernel spills (on Hopper by default one warp-specialized Gluon
kernel instead, attention_hopper, see dkdv_kernel: the same bits, 2-5% faster on an H100). On
Hopper the BF16 forward, dQ and dK/dV kernels that run by default are Gluon versions of these
(kernels/attention_hopper.py; fwd_kernel, dq_kernel, dkdv_kernel).

FP8 variants: Q, K, V, dO arrive quantized (kernels/quantize.py) with per-(token, head) scales,
which factor out of S and dP (_rhs_scaled_dot) and are folded into the in-register operands P', dS'
before those are quantized per row of the tile (_quantized_row_dot). FP8_MMA selects how the
E4M3 products run: Hopper's FP8 MMA (fast / precise accumulation) or block-scaled MMAs
(tl.dot_scaled, Blackwell); see fp8_mma_mode.

Layouts and names (shape suffixes):
    q_THD [T, Hq, D], k_THD / v_THD [T, Hkv, D], o_THD [T, Hq, D]   (any strides along T and H,
        unit stride along D)
    lse_HT [Hq, T] float32: base-2 log-sum-exp, lse2 = m + log2(l)
    delta_HT [Hq, T] float32: rowsum(dO * O), with the quantized dO' for the FP8 recipes
    qrow_HT4 [Hq, T, 4] float32 (FP8 backward): lse2, delta, sQ, sdO of each query, one row
        each, so that the dK/dV kernels read them with one load per query tile (QROW)
    skv_HT2 [Hkv, T, 2] float32 (FP8): sK, sV of each key, one row each, so that the forward and
        dQ kernels read them with one load per key tile (KROW)
    seg_start_T / seg_end_T [T] int32: first token / one past the last token of each token's
        segment (derived once per batch from cu_seqlens, see ``flamia.ops``)
    order_P [n_tiles] int32: the order in which tiles are launched (longest work first)

Scheduling on the global tile grid (no repacking): query tile m covers packed tokens
[m*BLOCK_M, (m+1)*BLOCK_M) whatever segments they belong to; it visits key tiles from the one
holding the segment start of its first row up to the diagonal. Key tiles entirely inside the
segment of every row of the tile and at or below the diagonal of the tile's first row take an
unmasked path (no mask arithmetic); the others (segment-boundary tiles and the diagonal) are
masked with key >= seg_start[row] and key <= row. The backward dK/dV kernel mirrors this for
key tiles: query tiles from the diagonal to the end of the last key's segment.

Softmax convention (shared with flamia.reference): base-2 logits, the running maximum is
rounded up to an integer, so rescaling is by exact powers of two. Every step rescales: lazy
rescaling (moving the maximum only when a row's grows by more than 2^8, FlashAttention-4's trick)
needs a decision shared by the tile's rows, and that decision leaks: on the H200 the BF16 probe
saw a later query of the same tile change an earlier token's O by 6e-5 (and the forward got
slower: 0.94 -> 0.99 ms, lognormal 1k; bench/results/fp8_sweep_20261203-1530_H200.txt).

Verified: interpreter tier (tests/test_kernels.py, tests/test_kernels_fp8.py) on CPU; GPU tier
on the H200 (sm_90) with triton 3.6 (bench/attention.py, tests/test_kernels_fp8.py and
tests/test_api.py, both dK/dV modes): all of them on 2026-12-03 at a2a1afb, the FP8 kernel tests
again at f8de224 (the packed per-query rows of the FP8 dK/dV kernels), tests/test_kernels.py and
test_api.py with both dQ modes at 92e5474, and test_kernels_fp8.py, test_kernels.py, test_api.py
at aaddad7 (the packed per-key scales).
"""

from __future__ import annotations

import os
import re

import torch
import triton
import triton.language as tl

from . import cuda_major
from . import quantize
from .quantize import INREG_ROW_SCALES, _quantize_tile, e8m0_exponent, pow2, round_e4m3

LOG2E = 1.4426950408889634
INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
# Two interpreter defects (triton 3.9, CPU) worked around under TRITON_INTERPRET=1 only:
# - tl.dot mis-reads 16-bit float operands (a bf16 x bf16 dot returns garbage): the operands are
#   widened to fp32 first (same values, already rounded to bf16; fp32 accumulation as on the GPU);
# - fp32 -> bf16 casts truncate instead of rounding to nearest even (the GPU rounds to nearest
#   even): the rounding is done by hand on the bits.
IS_INTERPRETER = tl.constexpr(INTERPRET)


# ------------------------------------------------------------------------------------------
# Tile configs
# ------------------------------------------------------------------------------------------

# Tile sizes are fixed per kernel family and head dim (the launch order is built for them);
# autotuning picks warps and pipeline depth. BF16: the Triton fused-attention tutorial's Hopper
# choices for the forward (128 x 64) and FA2's backward split, checked on the H200
# (bench/results/tile_sweep_20261202_H200.txt). FP8: 64 x 64 tiles everywhere, so that a 4-warp
# program fits and several run per SM (lognormal 1k, D=128: fwd+bwd 5.06 ms against 5.59 ms with
# the BF16 shapes, bench/results/fp8_sweep_20261203-1400_H200.txt). The FP8 tiles' in-register
# axis (forward and dQ BLOCK_N, dK/dV BLOCK_M) is the recipe's 64-token group.
BLOCKS = {  # (kernel, fp8) -> {head_dim: (BLOCK_M over queries, BLOCK_N over keys)}
    ("fwd", False): {64: (128, 64), 128: (128, 64)},
    ("dkdv", False): {64: (64, 128), 128: (64, 128)},
    ("dq", False): {64: (128, 64), 128: (128, 64)},
    ("fwd", True): {64: (64, 64), 128: (64, 64)},
    ("dkdv", True): {64: (64, 64), 128: (64, 64)},
    ("dq", True): {64: (64, 64), 128: (64, 64)},
}
# The FP8 dK/dV kernels read a query's lse2, delta, sQ and sdO as one 16-byte row of a [Hq, T, 4]
# array written by the delta kernel: one pipelined copy per query tile instead of four vector
# copies in the MMA's column layout (triton 3.6 SASS of the unmasked step: dV-only kernel 619 ->
# 444 instructions, dK-only 843 -> 576, bench/sass_report.py). BF16 keeps its two vectors (the
# packed load added spills there).
QROW = tl.constexpr(4)
# Likewise the per-key scales sK, sV: one 8-byte row per key ([Hkv, T, 2]) for the forward and
# dQ kernels, which load them in every step (triton 3.6 SASS of the unmasked step, compile-only,
# 2026-12-03: forward 645 -> 595 instructions, its spills gone; dQ 698 -> 569).
KROW = tl.constexpr(2)
BLOCKS_ENV = {"fwd": "FLAMIA_FWD_BLOCKS", "dkdv": "FLAMIA_BWD_BLOCKS", "dq": "FLAMIA_DQ_BLOCKS"}
INTERPRET_BLOCKS = (32, 32)


def _blocks(kernel: str, d: int, fp8: bool, mma: int | None = None) -> tuple[int, int]:
    """Tile shape of a kernel for head dim d; FLAMIA_{FWD,BWD,DQ}_BLOCKS="M,N" overrides it for
    both families (tile sweeps). ``mma``: the FP8 MMA mode (fp8_mma_mode() when None). The
    block-scaled MMA mode ("mx", Blackwell) keeps the BF16 shapes: with 64-row tiles triton
    lowers tl.dot_scaled to plain MMAs with the scales emulated (bench/ir_report.py --arch 100
    --mma mx), with 128-row tiles to block-scaled ones."""
    if INTERPRET:
        return INTERPRET_BLOCKS
    override = os.environ.get(BLOCKS_ENV[kernel])
    if override:
        m, n = (int(x) for x in override.split(","))
        return m, n
    if fp8 and (fp8_mma_mode() if mma is None else mma) == 2:
        fp8 = False
    shapes = BLOCKS[(kernel, fp8)]
    if d not in shapes:
        raise ValueError(f"head dim {d}: the compiled kernels take {sorted(shapes)} (any head dim "
                         "runs only in the interpreter, TRITON_INTERPRET=1)")
    return shapes[d]


KERNEL_CHOICES = ("auto", "triton", "gluon")


def _is_hopper() -> bool:
    return not INTERPRET and cuda_major() == 9


def _kernel_choice(env: str, fp8: bool, gluon_fp8: bool = False,
                   gluon_fp8_auto: bool = False) -> str:
    """"triton" or "gluon" for a kernel that has both: env = auto (default: gluon on Hopper,
    else triton), triton or gluon. gluon_fp8: the kernel has a Gluon FP8 variant (the forward,
    dK/dV), which runs when asked for (env=gluon), and with auto on Hopper if gluon_fp8_auto
    (dK/dV); otherwise the FP8 recipes run the triton kernel."""
    choice = os.environ.get(env, "auto")
    if choice not in KERNEL_CHOICES:
        raise ValueError(f"{env}={choice!r}; accepted: {KERNEL_CHOICES}")
    if fp8 and (not gluon_fp8 or (choice == "auto" and not gluon_fp8_auto)):
        return "triton"
    if choice == "gluon" and INTERPRET:
        raise ValueError(f"{env}=gluon: Gluon kernels do not run under TRITON_INTERPRET")
    if choice == "auto":
        return "gluon" if _is_hopper() else "triton"
    return choice


def fwd_kernel(fp8: bool = False) -> str:
    """Which forward runs, "triton" (_attn_fwd_kernel) or "gluon" (kernels/attention_hopper.py:
    warp-specialized, asynchronous warpgroup MMAs, TMA loads; Hopper only, no interpreter).
    FLAMIA_FWD_KERNEL=auto (default: gluon on Hopper for BF16, else triton), triton or gluon;
    read at every launch and by the batch plan. The Gluon FP8 forward runs only when asked for
    (gluon): it computes the triton FP8 forward's bits and is no faster (one document 2.62 vs
    2.58 ms, U(32, 1024) 0.51 vs 0.42; bench/results/fwd8_variants_20261204_H200.txt)."""
    return _kernel_choice("FLAMIA_FWD_KERNEL", fp8, gluon_fp8=True)


def dq_kernel(fp8: bool = False) -> str:
    """Which BF16 dQ kernel runs (separate-dQ mode, see dq_fused), "triton" (_attn_bwd_dq_kernel)
    or "gluon" (attention_hopper._attn_bwd_dq_hopper_kernel, same tiles): FLAMIA_DQ_KERNEL=auto
    (default: gluon on Hopper), triton or gluon; read at every launch."""
    return _kernel_choice("FLAMIA_DQ_KERNEL", fp8)


def dkdv_kernel(fp8: bool = False) -> str:
    """Which dK/dV kernel runs, "triton" (_attn_bwd_dkdv_kernel) or "gluon"
    (attention_hopper: warp-specialized, same tiles; BF16: 9-17% faster on the H200,
    bench/results/dkdv_variants_20261204_H200.txt; with FLAMIA_DQ=fused the plain Gluon kernel,
    which adds dQ too): FLAMIA_DKDV_KERNEL=auto (default: gluon on Hopper, else triton),
    triton or gluon; read at every launch. For the FP8 recipes the Gluon kernel
    (attention_hopper._attn_bwd_dkdv8_hopper_ws_kernel: dK and dV in one kernel, S^T and P^T
    computed once) computes the triton FP8 dK/dV kernels' bits (GPU test,
    tests/test_kernels_hopper.py) in 2-5% less fwd+bwd time (H100, 2026-12-06, four workloads,
    bench/results/attention_20261206-1910_*): the default on Hopper since the fifteenth
    session; with auto, inputs or settings it does not take (FLAMIA_FP8_MMA other than fast,
    other tiles) run the triton kernels. FLAMIA_FP8_DKDV (dkdv_parts) names one of the triton
    FP8 kernels' two forms: with auto it selects them; with gluon it is an error."""
    choice = _kernel_choice("FLAMIA_DKDV_KERNEL", fp8, gluon_fp8=True, gluon_fp8_auto=True)
    if fp8 and choice == "gluon" and "FLAMIA_FP8_DKDV" in os.environ:
        if os.environ.get("FLAMIA_DKDV_KERNEL", "auto") == "auto":
            return "triton"
        raise ValueError("FLAMIA_FP8_DKDV chooses between the triton FP8 dK/dV kernels and "
                         "FLAMIA_DKDV_KERNEL=gluon runs the Gluon one: set only one of them")
    return choice


def _gluon_takes(env: str, why: str | None) -> bool:
    """Once a kernel chose "gluon" (fwd_kernel, dq_kernel): whether the Gluon kernel runs on these
    inputs. ``why``: the reason it cannot (attention_hopper.supports), or None. With auto the
    triton kernel takes such inputs; with {env}=gluon they are an error, with the reason."""
    if why is None:
        return True
    if os.environ.get(env, "auto") == "gluon":
        raise ValueError(f"{env}=gluon: {why}")
    return False


def _gluon_fp8_mma() -> str | None:
    """Why the Gluon FP8 kernels cannot run the FP8 MMA mode of the moment, or None: they run
    Hopper's FP8 MMA with its native accumulation (fast) only."""
    mode = FP8_MMA_MODES[fp8_mma_mode()]
    return None if mode == "fast" else (
        f"FLAMIA_FP8_MMA={mode}: the Gluon FP8 kernels run the fast mode only; accepted with "
        "FLAMIA_FWD_KERNEL / FLAMIA_DKDV_KERNEL = gluon: FLAMIA_FP8_MMA=fast (or unset on Hopper)")


def fwd_short_docs(max_seqlen: int, d: int, fp8: bool = False) -> bool:
    """Whether a call's forward takes the short-document tiles (attention_hopper.SHORT_DOCS_CONFIG:
    64-wide key tiles, persistent): the BF16 Gluon forward on grid tiles at D = 64 or 128 (where
    it was measured), FLAMIA_GLUON_FWD unset, and every document at most SHORT_DOCS_MAX_SEQLEN
    tokens (``max_seqlen``, the caller's bound, as FlashAttention's varlen API takes it: no device
    sync). Decided per call on the host; the batch plan and the launch both follow it."""
    from . import attention_hopper
    if (fp8 or d not in attention_hopper.SHORT_DOCS_HEAD_DIMS or doc_tiles(fp8)
            or fwd_kernel(fp8) != "gluon"):
        return False
    return (not os.environ.get("FLAMIA_GLUON_FWD")
            and max_seqlen <= attention_hopper.SHORT_DOCS_MAX_SEQLEN)


def fwd_blocks(d: int, fp8: bool = False, short_docs: bool = False) -> tuple[int, int]:
    """(BLOCK_M, BLOCK_N) of the forward; short_docs: see fwd_short_docs."""
    if fwd_kernel(fp8) == "gluon":
        from . import attention_hopper
        return (attention_hopper.FWD8_CONFIG if fp8 else attention_hopper.config(short_docs))[:2]
    return _blocks("fwd", d, fp8)


def bwd_blocks(d: int, fp8: bool = False) -> tuple[int, int]:
    return _blocks("dkdv", d, fp8)


def dq_blocks(d: int, fp8: bool = False) -> tuple[int, int]:
    return _blocks("dq", d, fp8)


def plan_blocks(d: int, fp8: bool = False,
                short_docs: bool = False) -> tuple[tuple[int, int], ...]:
    """The tile shapes a batch plan is built for (its cache key: they follow the environment)."""
    return fwd_blocks(d, fp8, short_docs), bwd_blocks(d, fp8), dq_blocks(d, fp8)


def _configs(warps=(4, 8), stages=(2, 3)):
    """Warps x stages sweep (the tile shape is fixed above). Under the interpreter one config:
    multi-config autotune is meaningless and slow there."""
    if INTERPRET:
        return [triton.Config({}, num_warps=4, num_stages=1)]
    choice = os.environ.get("FLAMIA_AUTOTUNE", "")
    if choice == "0":  # correctness runs: skip the sweep's compiles
        return [triton.Config({}, num_warps=8, num_stages=2)]
    if choice:  # an explicit sweep: shorter GPU sessions and register-cap experiments
        return [_parse_config(item) for item in choice.split(",")]
    return [triton.Config({}, num_warps=w, num_stages=s) for w in warps for s in stages]


def _parse_config(item: str) -> triton.Config:
    """"WxS" (warps x stages) or "WxSrR" (and at most R registers per thread: ptxas's cap, so that
    more programs fit on an SM at the price of spills), e.g. "8x3" or "4x3r168"."""
    m = re.fullmatch(r"(\d+)x(\d+)(?:r(\d+))?", item.strip())
    if m is None:
        raise ValueError(f"FLAMIA_AUTOTUNE item {item!r}; accepted: WxS or WxSrR, e.g. 8x3, 4x3r168")
    warps, stages, regs = (int(g) if g else None for g in m.groups())
    return triton.Config({}, num_warps=warps, num_stages=stages, maxnreg=regs)


@triton.jit
def _dot(a, b, acc=None):
    if IS_INTERPRETER:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), acc)
    return tl.dot(a, b, acc)


@triton.jit
def _dot8(a, b, FP8_MMA: tl.constexpr):
    """a @ b (fp32 result) for two E4M3 operands on Hopper's FP8 tensor cores. By default
    (FP8_MMA == 0; triton on sm_90) a whole K chain of one tl.dot accumulates inside the tensor
    core, whose FP8 accumulator keeps fewer bits than fp32; FP8_MMA == 1 promotes the partial sum
    to fp32 after every 32 products (one wgmma K step), at some speed cost (bench.fp8_check)."""
    # if/else, not early returns: triton generates the code after a constexpr-guarded return.
    if IS_INTERPRETER:
        out = tl.dot(a.to(tl.float32), b.to(tl.float32))
    elif FP8_MMA == 1:
        out = tl.dot(a, b, max_num_imprecise_acc=32)
    else:
        out = tl.dot(a, b)
    return out


@triton.jit
def _e8m0_bits(scale):
    """The E8M0 byte of a power-of-two fp32 scale: its exponent field (2^-127, the fp32 subnormal
    0x00400000, has field 0, which is E8M0's 2^-127)."""
    return ((scale.to(tl.uint32, bitcast=True) >> 23) & 0xFF).to(tl.uint8)


@triton.jit
def _mx_dot(a, sa, b, sb):
    """(a * sa[:, None]) @ (b * sb[None, :]) as one block-scaled MMA (tl.dot_scaled: Blackwell's
    MX MMA; other GPUs and the interpreter emulate it). a [M, K] and b [K, N] hold E4M3 values,
    sa [M] and sb [N] are power-of-two scales constant along K, so every 32-element block of a
    row (column) carries the same E8M0 scale: the same bytes and scales as the Hopper path."""
    sa8 = tl.broadcast_to(_e8m0_bits(sa)[:, None], (a.shape[0], a.shape[1] // 32))
    sb8 = tl.broadcast_to(_e8m0_bits(sb)[:, None], (b.shape[1], a.shape[1] // 32))
    return tl.dot_scaled(a.to(tl.float8e4nv), sa8, "e4m3", b.to(tl.float8e4nv), sb8, "e4m3")


@triton.jit
def _rhs_scaled_dot(a, b, sb, IS_FP8: tl.constexpr, QK_BF16: tl.constexpr, FP8_MMA: tl.constexpr):
    """a @ (b * sb[None, :]) in fp32 for the products whose operands carry per-token scales
    constant along the contraction (S = Q K^T, dP = dO V^T and their transposes). The left
    operand's per-token scale is a per-row factor of the result that the caller applies fused
    with its next step (one FMA per element: logits y * c - m, see _fwd_tile). E4M3 data (mxfp8;
    dO, V in every FP8 recipe): Hopper's FP8 MMA with sb applied to the fp32 result (exact for
    E8M0 scales; fp8_rowwise's fp32 ones round once), or sb inside the MMA as E8M0 block scales
    (FP8_MMA == 2, E8M0 scales only); bf16 data (nvfp4_fp8's exact NVFP4 Q, K): a bf16 MMA;
    bf16 recipe: no scales (sb unused)."""
    if IS_FP8 and not QK_BF16:
        if FP8_MMA == 2:
            out = _mx_dot(a, tl.full((a.shape[0],), 1.0, tl.float32), b, sb)
        else:
            out = _dot8(a, b, FP8_MMA) * sb[None, :]
    elif IS_FP8:
        out = _dot(a, b) * sb[None, :]
    else:
        out = _dot(a, b)
    return out


@triton.jit
def _load(ptrs, mask, other, MASKED: tl.constexpr):
    """A tile load, masked only in tiles that can reach past the data: the unmasked tiles of
    the scheduler lie inside one segment, so their loads need no predicates (fewer instructions
    in the inner loops)."""
    if MASKED:
        out = tl.load(ptrs, mask=mask, other=other)
    else:
        out = tl.load(ptrs)
    return out


@triton.jit
def _bf16(x):
    """fp32 -> bf16, round to nearest even (finite inputs)."""
    if IS_INTERPRETER:
        bits = x.to(tl.uint32, bitcast=True)
        bits = (bits + (((bits >> 16) & 1) + 0x7FFF)) & 0xFFFF0000
        return bits.to(tl.float32, bitcast=True).to(tl.bfloat16)
    return x.to(tl.bfloat16)


@triton.jit
def _query_tile(entry, seg_start_ptr, seg_end_ptr, total, H_Q: tl.constexpr,
                H_KV: tl.constexpr, BLOCK_M: tl.constexpr, DOC_TILES: tl.constexpr):
    """The query tile this program owns (grid (heads, tiles), tiles in launch order; ``entry``:
    its entry of the launch order, >= 0). Grid tiles: entry is the tile's index on the packed
    grid, its rows [entry * BLOCK_M, + BLOCK_M) may hold several segments. DOC_TILES: entry is
    the tile's first row, a segment start plus a multiple of BLOCK_M; its rows are those of
    that segment (rows past the segment's end belong to the next one: never stored)."""
    head = tl.program_id(0)
    kv_head = head // (H_Q // H_KV)
    if DOC_TILES:
        start_m = entry
        row_end = tl.load(seg_end_ptr + entry)
    else:
        start_m = entry * BLOCK_M
        row_end = total
    offs_m = start_m + tl.arange(0, BLOCK_M)
    row_ok = offs_m < row_end
    seg_start_m = tl.load(seg_start_ptr + offs_m, mask=row_ok, other=total)
    last_row = tl.minimum(start_m + BLOCK_M, row_end) - 1
    return head, kv_head, start_m, offs_m, row_ok, seg_start_m, last_row


@triton.jit
def _key_tile_ranges(seg_start_ptr, start_m, last_row, BLOCK_N: tl.constexpr,
                     DOC_TILES: tl.constexpr):
    """Key tiles a query tile [start_m, last_row] visits (forward and dQ): tile n holds keys
    [key0 + n * BLOCK_N, + BLOCK_N); [lo, full_lo) boundary tiles (masked), [full_lo, full_hi)
    unmasked (inside the segment of every row and at or below the first row's diagonal),
    [full_hi, hi) diagonal tiles (masked). Keys before the first row's segment start and after
    the last row are never visible, so no tile outside [lo, hi) is needed and loads stay in
    bounds. Grid tiles: key0 = 0 (the packed grid). DOC_TILES: key0 is the segment's start
    (all rows are in one segment, so only the diagonal tiles are masked)."""
    first_seg_start = tl.load(seg_start_ptr + start_m)
    if DOC_TILES:
        key0 = first_seg_start
        lo = 0
        hi = tl.cdiv(last_row + 1 - key0, BLOCK_N)
        full_lo = 0
        full_hi = tl.minimum((start_m - key0 + 1) // BLOCK_N, hi)
    else:
        key0 = 0
        last_seg_start = tl.load(seg_start_ptr + last_row)
        lo = first_seg_start // BLOCK_N
        hi = tl.cdiv(last_row + 1, BLOCK_N)
        full_lo = tl.minimum(tl.cdiv(last_seg_start, BLOCK_N), hi)
        full_hi = tl.maximum(tl.minimum((start_m + 1) // BLOCK_N, hi), full_lo)
    return key0, lo, full_lo, full_hi, hi


@triton.jit
def _quantize_rows(x, fold):
    """x * fold[None, :] quantized in registers: E4M3 values (FP8 storage, see round_e4m3) with one
    E8M0 scale per row over this tile's columns (the recipe's in-register group), returned as
    (data, power-of-two scale). ``fold`` is the per-token scale of the other operand's tokens,
    folded in before quantization; masked entries of x are exactly 0 and never enter a scale."""
    xf = x * fold[None, :]
    if INREG_ROW_SCALES:
        exp = e8m0_exponent(tl.max(tl.abs(xf), 1))
    else:  # timing experiment only (quantize.INREG_ROW_SCALES): scale 1, wrong values
        exp = tl.zeros([x.shape[0]], tl.int32)
    # Multiplying by the exact reciprocal 2^-exp is the same IEEE result as dividing by the scale.
    return round_e4m3(xf * pow2(-exp)[:, None]), pow2(exp)


@triton.jit
def _row_scaled_dot(a, scale, b, B_IS_BF16: tl.constexpr, FP8_MMA: tl.constexpr):
    """(a * scale[:, None]) @ b for a row-quantized operand (_quantize_rows) with the row scale
    applied to the fp32 result. B_IS_BF16: b holds bf16 values (nvfp4_fp8's exact NVFP4 Q/K), so
    the E4M3 operand is widened to bf16 (exact) for a bf16 MMA."""
    if B_IS_BF16:
        out = _dot(a.to(tl.bfloat16), b) * scale[:, None]
    elif FP8_MMA == 2:  # the row scale as E8M0 block scales; b's own scale is folded: 1
        out = _mx_dot(a, scale, b, tl.full((b.shape[1],), 1.0, tl.float32))
    else:
        out = _dot8(a, b, FP8_MMA) * scale[:, None]
    return out


@triton.jit
def _quantized_row_dot(x, fold, b, B_IS_BF16: tl.constexpr, FP8_MMA: tl.constexpr):
    """(x * fold[None, :]) @ b with the left operand quantized in registers (_quantize_rows)."""
    a, scale = _quantize_rows(x, fold)
    return _row_scaled_dot(a, scale, b, B_IS_BF16, FP8_MMA)


# ------------------------------------------------------------------------------------------
# Forward
# ------------------------------------------------------------------------------------------


@triton.jit
def _key_scales(skv_ptrs, offs_n, key_ok, MASKED: tl.constexpr):
    """sK, sV of the keys offs_n from their [T, KROW] rows (1 past the last token)."""
    rows = _load(skv_ptrs + offs_n[:, None] * KROW + tl.arange(0, KROW)[None, :],
                 key_ok[:, None], 1.0, MASKED)
    return tl.split(rows)


@triton.jit
def _fwd_tile(acc, l_i, m_i, q, c_q, k_ptrs, v_ptrs, skv_ptrs, offs_m, seg_start_m,
              start_n, stride_kt, stride_vt, total,
              BLOCK_N: tl.constexpr, MASKED: tl.constexpr, IS_FP8: tl.constexpr,
              QK_BF16: tl.constexpr, FP8_MMA: tl.constexpr):
    offs_n = start_n + tl.arange(0, BLOCK_N)
    # Only masked (diagonal) tiles can reach past the last token.
    key_ok = offs_n < total  # used by masked tiles only
    k = _load(k_ptrs + tl.cast(start_n, tl.int64) * stride_kt, key_ok[None, :], 0.0, MASKED)
    if IS_FP8:  # per-token scales factor out of S = Q K^T (see _rhs_scaled_dot); one row each
        sk, sv = _key_scales(skv_ptrs, offs_n, key_ok, MASKED)
    else:
        sk = None
        sv = None
    # Base-2 logits y * c_q[:, None]; c_q = sQ * softmax scale * log2(e) per query row.
    y = _rhs_scaled_dot(q, k, sk, IS_FP8, QK_BF16, FP8_MMA)
    if MASKED:
        visible = (offs_n[None, :] >= seg_start_m[:, None]) & (offs_n[None, :] <= offs_m[:, None])
        y = tl.where(visible, y, float("-inf"))
    # Integer running max: rescaling factors are exact powers of two (see module docstring).
    # c_q > 0 and rounding is monotonic, so max(y) * c_q is exactly the row max of the logits.
    m_new = tl.maximum(m_i, tl.math.ceil(tl.max(y, 1) * c_q))
    # A row with nothing visible yet keeps m = -inf; subtract 0 instead to avoid inf - inf.
    m_sub = tl.where(m_new == float("-inf"), 0.0, m_new)
    alpha = tl.math.exp2(m_i - m_sub)
    p = tl.math.exp2(y * c_q[:, None] - m_sub[:, None])  # one FMA per element
    l_i = l_i * alpha + tl.sum(p, 1)
    if IS_FP8:  # V's token-major copy is zero-padded: no mask along its contiguous token axis
        v = tl.load(v_ptrs + tl.cast(start_n, tl.int64) * stride_vt)
    else:
        v = _load(v_ptrs + tl.cast(start_n, tl.int64) * stride_vt, key_ok[:, None], 0.0, MASKED)
    if IS_FP8:  # O += P' V8 with P' = P sV quantized per row of the tile
        acc = acc * alpha[:, None] + _quantized_row_dot(p, sv, v, False, FP8_MMA)
    else:
        acc = acc * alpha[:, None] + _dot(_bf16(p), v)
    return acc, l_i, m_new


@triton.autotune(configs=_configs(), key=["HEAD_DIM", "H_Q", "H_KV", "IS_FP8", "QK_BF16",
                                          "FP8_MMA", "DOC_TILES"])
@triton.jit
def _attn_fwd_kernel(
    q_ptr, k_ptr, v_ptr, sq_ptr, skv_ptr, o_ptr, lse_ptr, seg_start_ptr, seg_end_ptr,
    order_ptr, stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh, stride_vd,
    stride_sqh, stride_skh, stride_ot, stride_oh, stride_lh, total, qk_scale,
    H_Q: tl.constexpr, H_KV: tl.constexpr, HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, IS_FP8: tl.constexpr, QK_BF16: tl.constexpr,
    FP8_MMA: tl.constexpr, DOC_TILES: tl.constexpr,
):
    """Forward. FP8 recipes: Q, K are E4M3 (mxfp8) or bf16 holding exact NVFP4 values
    (nvfp4_fp8, a bf16 MMA for S: Hopper has no FP4 MMA); V is E4M3 in both. DOC_TILES: see
    doc_tiles (the launch order's entries are tiles' first rows, -1 past the last tile)."""
    entry = tl.load(order_ptr + tl.program_id(1))
    if DOC_TILES:  # (under the constexpr: the grid kernels' code stays as it was)
        if entry < 0:
            return
    head, kv_head, start_m, offs_m, row_ok, seg_start_m, last_row = _query_tile(
        entry, seg_start_ptr, seg_end_ptr, total, H_Q, H_KV, BLOCK_M, DOC_TILES)
    offs_d = tl.arange(0, HEAD_DIM)

    q_ptrs = (q_ptr + offs_m.to(tl.int64)[:, None] * stride_qt + head * stride_qh
              + offs_d[None, :])
    q = tl.load(q_ptrs, mask=row_ok[:, None], other=0.0)
    if IS_FP8:  # per-row factor of the logits (see _rhs_scaled_dot)
        c_q = tl.load(sq_ptr + head * stride_sqh + offs_m, mask=row_ok, other=1.0) * qk_scale
    else:
        c_q = tl.full([BLOCK_M], qk_scale, tl.float32)
    k_base = k_ptr + kv_head * stride_kh + offs_d[:, None]
    # V is [T, Hkv, D] (bf16) or its transposed FP8 copy [Hkv, D, T] (stride_vt == 1): the FP8
    # MMA wants the token axis, P V's contraction, contiguous.
    v_base = v_ptr + kv_head * stride_vh + offs_d[None, :].to(tl.int64) * stride_vd
    k_ptrs = k_base + tl.arange(0, BLOCK_N)[None, :].to(tl.int64) * stride_kt
    v_ptrs = v_base + tl.arange(0, BLOCK_N)[:, None].to(tl.int64) * stride_vt
    skv_ptrs = skv_ptr + kv_head * stride_skh

    key0, lo, full_lo, full_hi, hi = _key_tile_ranges(seg_start_ptr, start_m, last_row, BLOCK_N,
                                                      DOC_TILES)

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    for n in range(lo, full_lo):
        acc, l_i, m_i = _fwd_tile(acc, l_i, m_i, q, c_q, k_ptrs, v_ptrs, skv_ptrs, offs_m,
                                  seg_start_m, key0 + n * BLOCK_N, stride_kt, stride_vt, total,
                                  BLOCK_N, True, IS_FP8, QK_BF16, FP8_MMA)
    for n in range(full_lo, full_hi):
        acc, l_i, m_i = _fwd_tile(acc, l_i, m_i, q, c_q, k_ptrs, v_ptrs, skv_ptrs, offs_m,
                                  seg_start_m, key0 + n * BLOCK_N, stride_kt, stride_vt, total,
                                  BLOCK_N, False, IS_FP8, QK_BF16, FP8_MMA)
    for n in range(full_hi, hi):
        acc, l_i, m_i = _fwd_tile(acc, l_i, m_i, q, c_q, k_ptrs, v_ptrs, skv_ptrs, offs_m,
                                  seg_start_m, key0 + n * BLOCK_N, stride_kt, stride_vt, total,
                                  BLOCK_N, True, IS_FP8, QK_BF16, FP8_MMA)

    o = acc / l_i[:, None]
    o_ptrs = o_ptr + offs_m.to(tl.int64)[:, None] * stride_ot + head * stride_oh + offs_d[None, :]
    tl.store(o_ptrs, _bf16(o), mask=row_ok[:, None])
    tl.store(lse_ptr + head * stride_lh + offs_m, m_i + tl.math.log2(l_i), mask=row_ok)


# ------------------------------------------------------------------------------------------
# Backward preprocess: delta = rowsum(dO * O), one pass over both (fp32 math)
# ------------------------------------------------------------------------------------------


@triton.jit
def _delta_rows(o_ptr, do, sdo, lse_ptr, sq_ptr, delta_ptr, qrow_ptr, head, offs_t, stride_ot,
                stride_oh, stride_lh, stride_rh, total, HEAD_DIM: tl.constexpr,
                IS_FP8: tl.constexpr):
    """delta = rowsum(dO * O) of a [BLOCK_T, D] tile of one head, with the dO that dP is
    computed from: bf16 dO, or for the FP8 recipes the E4M3 dO, the row sum times its per-token
    scale sdo (the reference's order; for E8M0 scales exactly rowsum(dO' * O)). FP8: also the
    per-query rows (lse2, delta, sQ, sdO) that the dK/dV kernels read (QROW)."""
    offs_d = tl.arange(0, HEAD_DIM)
    ok = offs_t < total
    rows = offs_t.to(tl.int64)[:, None]
    o = tl.load(o_ptr + rows * stride_ot + head * stride_oh + offs_d[None, :], mask=ok[:, None],
                other=0.0)
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)
    if IS_FP8:
        delta = delta * sdo
    tl.store(delta_ptr + head * stride_lh + offs_t, delta, mask=ok)
    if IS_FP8:
        row = qrow_ptr + head * stride_rh + offs_t * QROW
        tl.store(row, tl.load(lse_ptr + head * stride_lh + offs_t, mask=ok), mask=ok)
        tl.store(row + 1, delta, mask=ok)
        tl.store(row + 2, tl.load(sq_ptr + head * stride_lh + offs_t, mask=ok), mask=ok)
        tl.store(row + 3, sdo, mask=ok)


@triton.jit
def _attn_bwd_delta_kernel(o_ptr, do_ptr, sdo_ptr, lse_ptr, sq_ptr, delta_ptr, qrow_ptr,
                           stride_ot, stride_oh, stride_dot, stride_doh, stride_lh, stride_rh,
                           total, HEAD_DIM: tl.constexpr, BLOCK_T: tl.constexpr,
                           IS_FP8: tl.constexpr):
    """_delta_rows of tile (program 0) and head (program 1), from dO (bf16, or FP8: E4M3 with
    its scales sdo) in memory."""
    head = tl.program_id(1)
    offs_t = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    ok = offs_t < total
    do = tl.load(do_ptr + offs_t.to(tl.int64)[:, None] * stride_dot + head * stride_doh
                 + tl.arange(0, HEAD_DIM)[None, :], mask=ok[:, None], other=0.0)
    if IS_FP8:
        sdo = tl.load(sdo_ptr + head * stride_lh + offs_t, mask=ok, other=1.0)
    else:
        sdo = None
    _delta_rows(o_ptr, do, sdo, lse_ptr, sq_ptr, delta_ptr, qrow_ptr, head, offs_t, stride_ot,
                stride_oh, stride_lh, stride_rh, total, HEAD_DIM, IS_FP8)


@triton.jit
def _attn_bwd_prep8_kernel(do_ptr, o_ptr, do8_ptr, sdo_ptr, dot_ptr, lse_ptr, sq_ptr, delta_ptr,
                           qrow_ptr, stride_dot, stride_doh, stride_ot, stride_oh, stride_d8t,
                           stride_d8h, stride_lh, stride_rh, stride_th, stride_td, total,
                           HEAD_DIM: tl.constexpr, BLOCK_T: tl.constexpr,
                           FP32_SCALE: tl.constexpr):
    """The FP8 backward's first kernel, one pass over dO: dO quantized per (token, head) with its
    token-major copy (quantize._quantize_tile: the bytes of quantize_mx_token), then from those
    values delta and the per-query rows (_delta_rows) instead of a second kernel that reads the
    E4M3 dO back. Grid (tiles over T_pad, Hq). FP32_SCALE: fp8_rowwise's fp32 scales."""
    head = tl.program_id(1)
    offs_t = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    do8, sdo = _quantize_tile(do_ptr, do8_ptr, sdo_ptr, dot_ptr, head, stride_dot, stride_doh,
                              stride_d8t, stride_d8h, stride_lh, 1, stride_th, stride_td, total,
                              HEAD_DIM, BLOCK_T, False, True, FP32_SCALE)
    _delta_rows(o_ptr, do8, sdo, lse_ptr, sq_ptr, delta_ptr, qrow_ptr, head, offs_t, stride_ot,
                stride_oh, stride_lh, stride_rh, total, HEAD_DIM, True)


@triton.jit
def _split4(x):
    """The four columns of a [M, 4] tile."""
    a, b = tl.split(tl.reshape(x, (x.shape[0], 2, 2)))  # columns (0, 2) and (1, 3)
    c0, c2 = tl.split(a)
    c1, c3 = tl.split(b)
    return c0, c1, c2, c3


# ------------------------------------------------------------------------------------------
# Backward: dK, dV over key tiles
# ------------------------------------------------------------------------------------------


@triton.jit
def _dkdv_tile(dk, dv, k, v, c_k, sv_n, q_ptrs, do_ptrs, qk_ptrs, dok_ptrs, qrow_ptrs,
               lse_ptrs, delta_ptrs, dqa_ptrs, sem_ptrs, seg_start_ptr, tile, offs_n, seg_end_n,
               start_m, stride_qt, stride_dot, stride_qkt, stride_dokt, stride_dqat, total,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, MASKED: tl.constexpr,
               IS_FP8: tl.constexpr, QK_BF16: tl.constexpr, FP8_MMA: tl.constexpr,
               PART: tl.constexpr, DQ_FUSED: tl.constexpr):
    """One query tile's contribution to dK and dV (PART == 0), to dV only (1) or dK only (2),
    and with DQ_FUSED its contribution dS K to dQ (_ordered_dq_add)."""
    offs_m = start_m + tl.arange(0, BLOCK_M)
    row_ok = offs_m < total
    shift = tl.cast(start_m, tl.int64)
    qT = _load(q_ptrs + shift * stride_qt, row_ok[None, :], 0.0, MASKED)  # [D, BLOCK_M]
    if IS_FP8:  # lse2, delta, sQ, sdO of each query: one row each (QROW); 0 past the last token
        rows = qrow_ptrs + offs_m[:, None] * QROW + tl.arange(0, QROW)[None, :]
        lse, delta, sq_m, sdo_m = _split4(_load(rows, row_ok[:, None], 0.0, MASKED))
    else:
        lse = _load(lse_ptrs + offs_m, row_ok, 0.0, MASKED)
        delta = None  # loaded below, next to dO
        sq_m = None
        sdo_m = None
    # Base-2 logits S^T = yT * c_k[:, None] [BLOCK_N, BLOCK_M], c_k = sK * softmax scale * log2(e)
    yT = _rhs_scaled_dot(k, qT, sq_m, IS_FP8, QK_BF16, FP8_MMA)
    pT = tl.math.exp2(yT * c_k[:, None] - lse[None, :])
    if MASKED:
        visible = (offs_m[None, :] >= offs_n[:, None]) & (offs_m[None, :] < seg_end_n[:, None])
        pT = tl.where(visible, pT, 0.0)
    # dO feeds dP^T (unused, hence not loaded, by the dV-only FP8 kernel). BF16 loads delta here,
    # next to dO: loaded at the top it adds spills (triton 3.6).
    do = _load(do_ptrs + shift * stride_dot, row_ok[:, None], 0.0, MASKED)  # [BLOCK_M, D]
    if not IS_FP8:
        delta = _load(delta_ptrs + offs_m, row_ok, 0.0, MASKED)
    if IS_FP8 and PART == 1:  # dV = P'^T dO8, P'^T = P^T sdO quantized per row of this tile
        # dO read from its token-contiguous copy (K-major for the MMA), zero-padded: no mask.
        do_k = tl.load(dok_ptrs + shift * stride_dokt)
        dv = dv + _quantized_row_dot(pT, sdo_m, do_k, False, FP8_MMA)
    elif IS_FP8:
        # dP^T - delta = ydT * sV - delta, one FMA per element.
        ydT = _rhs_scaled_dot(v, tl.trans(do), sdo_m, IS_FP8, False, FP8_MMA)
        dsT = pT * (ydT * sv_n[:, None] - delta[None, :])
        # dS'^T = dS^T sQ quantized per row; dK = dS'^T Q8 with Q's token-contiguous copy.
        ds8, ds_scale = _quantize_rows(dsT, sq_m)
        if PART == 0:
            # P'^T is quantized before either MMA runs, so that only packed E4M3 bytes are live
            # next to dK, dV and an MMA result (the fp32 tiles otherwise add spills).
            p8, p_scale = _quantize_rows(pT, sdo_m)
            do_k = tl.load(dok_ptrs + shift * stride_dokt)
            dv = dv + _row_scaled_dot(p8, p_scale, do_k, False, FP8_MMA)
        q_k = tl.load(qk_ptrs + shift * stride_qkt)
        dk = dk + _row_scaled_dot(ds8, ds_scale, q_k, QK_BF16, FP8_MMA)
    else:
        dv = _dot(_bf16(pT), do, dv)
        dpT_delta = _rhs_scaled_dot(v, tl.trans(do), None, IS_FP8, False, FP8_MMA) - delta[None, :]
        dsT = _bf16(pT * dpT_delta)
        dk = _dot(dsT, tl.trans(qT), dk)
        if DQ_FUSED:
            _ordered_dq_add(_dot(tl.trans(dsT), k), dqa_ptrs + shift * stride_dqat, row_ok,
                            sem_ptrs + start_m // BLOCK_M,
                            tile - tl.load(seg_start_ptr + start_m) // BLOCK_N, MASKED)
    return dk, dv


@triton.jit
def _ordered_dq_add(dq_part, dqa_ptrs, row_ok, sem_ptr, rank, MASKED: tl.constexpr):
    """dQ[query tile] += dq_part (fp32, in memory), in a fixed order: the key tiles that see a
    query tile add their parts in increasing key-tile order, so dQ is the same bits on every run
    (a plain atomic accumulation is not, and the bitwise gradient-causality probe would report
    its run-to-run noise as a leak). ``sem_ptr``: the query tile's counter of parts added so far;
    ``rank``: this key tile's place among the query tile's key tiles (0 for the first). The
    program waits until the counter reaches its rank, adds, then releases the next one. This
    needs every key tile a program waits for to be launched before it: the dK/dV launch order
    (flamia.ops, dq_fused plans) keeps the key tiles that share a query tile in increasing
    order, and the grid runs one kv head's tiles in launch order."""
    if IS_INTERPRETER:
        # Programs run one after another here, so a wait could never end: a part added out of
        # order turns dQ into NaN instead (tests check that this happens for a bad order).
        in_order = tl.atomic_add(sem_ptr, 0) == rank
        tl.atomic_add(dqa_ptrs, tl.where(in_order, dq_part, float("nan")), mask=row_ok[:, None])
        tl.atomic_add(sem_ptr, 1)
    else:
        # Every thread of the program adds its own 1 to the counter after its own part (release:
        # its adds are visible before its increment), so rank r is reached at r * threads, and
        # no CTA barrier is needed (a barrier in the loop stops triton from software-pipelining
        # the loads of the loop over query tiles, bench/sass_report; so would a triton while
        # loop, hence the wait as one asm loop). A thread waits while the counter is below
        # r * threads, not until it equals it: the program's faster threads may have added
        # their 1s before a slower one first reads it, and a wait for equality would then never
        # end (the counter cannot pass (r + 1) * threads before this program is done).
        count = tl.inline_asm_elementwise(
            "{ .reg .pred p; .reg .b32 n, want; mov.u32 n, %ntid.x; mul.lo.s32 want, $2, n; "
            "WAIT: ld.acquire.gpu.global.b32 $0, [$1]; setp.lt.s32 p, $0, want; @p bra WAIT; "
            "div.s32 $0, $0, n; }",
            "=r,l,r", [sem_ptr, rank], dtype=tl.int32, is_pure=False, pack=1)
        # The adds depend on the value read, so they are not issued before the wait ends.
        in_order = count == rank
        if MASKED:
            in_order = in_order & row_ok[:, None]
        tl.atomic_add(dqa_ptrs, dq_part, mask=in_order, sem="relaxed")
        tl.inline_asm_elementwise(
            "{ mov.u32 $0, 0; red.release.gpu.global.add.s32 [$1], 1; }",
            "=r,l", [sem_ptr], dtype=tl.int32, is_pure=False, pack=1)


# reset_to_zero: every timed run of the autotuner starts from a zero dQ accumulator and zero
# counters (DQ_FUSED), else the second run would wait for counts the first one already passed.
_attn_bwd_dkdv_kernel_reset = ("dqa_ptr", "sem_ptr")


@triton.autotune(configs=_configs(), key=["HEAD_DIM", "H_Q", "H_KV", "IS_FP8", "QK_BF16",
                                          "FP8_MMA", "PART", "DQ_FUSED", "DOC_TILES"],
                 reset_to_zero=list(_attn_bwd_dkdv_kernel_reset))
@triton.jit
def _attn_bwd_dkdv_kernel(
    q_ptr, k_ptr, v_ptr, do_ptr, qk_ptr, dok_ptr, qrow_ptr, skv_ptr,
    lse_ptr, delta_ptr, dk_ptr, dv_ptr, dqa_ptr, sem_ptr, seg_start_ptr, seg_end_ptr, order_ptr,
    stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh, stride_dot, stride_doh,
    stride_qkt, stride_qkh, stride_qkd, stride_dokt, stride_dokh, stride_dokd,
    stride_rh, stride_skh, stride_dkt, stride_dkh, stride_dvt, stride_dvh, stride_lh,
    stride_dqat, stride_dqah, stride_semh, total, qk_scale, sm_scale,
    H_Q: tl.constexpr, H_KV: tl.constexpr, HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, IS_FP8: tl.constexpr, QK_BF16: tl.constexpr,
    FP8_MMA: tl.constexpr, PART: tl.constexpr, DQ_FUSED: tl.constexpr, DOC_TILES: tl.constexpr,
):
    """dK and dV of one key tile (PART == 0), or only dV (1) or only dK (2): see dkdv_parts.
    DQ_FUSED (BF16): also dS K into the fp32 dQ accumulator dqa [T, Hq, D] (see dq_fused).
    DOC_TILES (see doc_tiles): the launch order's entries are key tiles' first keys (-1 past
    the last tile); the tile's keys and the query tiles it visits start at its segment's start,
    keys past the segment's end belong to the next one and are never stored."""
    kv_head = tl.program_id(0)
    tile = tl.load(order_ptr + tl.program_id(1))
    if DOC_TILES:
        if tile < 0:  # past the last tile
            return
        start_n = tile
        key_end = tl.load(seg_end_ptr + start_n)
        query0 = tl.load(seg_start_ptr + start_n)  # query tile m: rows query0 + m * BLOCK_M ..
    else:
        start_n = tile * BLOCK_N
        key_end = total
        query0 = 0
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    col_ok = offs_n < key_end
    seg_end_n = tl.load(seg_end_ptr + offs_n, mask=col_ok, other=0)
    last_key = tl.minimum(start_n + BLOCK_N, key_end) - 1

    k = tl.load(k_ptr + offs_n.to(tl.int64)[:, None] * stride_kt + kv_head * stride_kh
                + offs_d[None, :], mask=col_ok[:, None], other=0.0)
    v = tl.load(v_ptr + offs_n.to(tl.int64)[:, None] * stride_vt + kv_head * stride_vh
                + offs_d[None, :], mask=col_ok[:, None], other=0.0)
    if IS_FP8:  # c_k: per-row factor of S^T (see _rhs_scaled_dot)
        sk_n, sv_n = _key_scales(skv_ptr + kv_head * stride_skh, offs_n, col_ok, True)
        c_k = sk_n * qk_scale
    else:
        c_k = tl.full([BLOCK_N], qk_scale, tl.float32)
        sv_n = None

    # Query-tile ranges: [lo, full_lo) diagonal tiles (masked), [full_lo, full_hi) unmasked,
    # [full_hi, hi) tiles reaching past the first key's segment end (masked).
    first_seg_end = tl.load(seg_end_ptr + start_n)
    last_seg_end = tl.load(seg_end_ptr + last_key)
    lo = (start_n - query0) // BLOCK_M
    hi = tl.cdiv(last_seg_end - query0, BLOCK_M)
    full_lo = tl.minimum(tl.cdiv(last_key - query0, BLOCK_M), hi)
    full_hi = tl.maximum(tl.minimum((first_seg_end - query0) // BLOCK_M, hi), full_lo)

    dk = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    offs_mb = tl.arange(0, BLOCK_M).to(tl.int64)
    d64 = offs_d.to(tl.int64)
    for g in range(H_Q // H_KV):  # the query heads reading this kv head: no atomics
        head = kv_head * (H_Q // H_KV) + g
        q_ptrs = q_ptr + head * stride_qh + offs_d[:, None] + offs_mb[None, :] * stride_qt
        do_ptrs = do_ptr + head * stride_doh + offs_d[None, :] + offs_mb[:, None] * stride_dot
        # token-contiguous copies (FP8 only): [BLOCK_M, D] tiles with the token axis contiguous
        qk_ptrs = (qk_ptr + head * stride_qkh + d64[None, :] * stride_qkd
                   + offs_mb[:, None] * stride_qkt)
        dok_ptrs = (dok_ptr + head * stride_dokh + d64[None, :] * stride_dokd
                    + offs_mb[:, None] * stride_dokt)
        qrow_ptrs = qrow_ptr + head * stride_rh  # FP8: [T, QROW] rows (lse2, delta, sQ, sdO)
        lse_ptrs = lse_ptr + head * stride_lh
        delta_ptrs = delta_ptr + head * stride_lh
        dqa_ptrs = dqa_ptr + head * stride_dqah + offs_d[None, :] + offs_mb[:, None] * stride_dqat
        sem_ptrs = sem_ptr + head * stride_semh
        for m in range(lo, full_lo):
            dk, dv = _dkdv_tile(dk, dv, k, v, c_k, sv_n, q_ptrs, do_ptrs, qk_ptrs, dok_ptrs,
                                qrow_ptrs, lse_ptrs, delta_ptrs, dqa_ptrs, sem_ptrs,
                                seg_start_ptr, tile, offs_n, seg_end_n, query0 + m * BLOCK_M,
                                stride_qt, stride_dot, stride_qkt, stride_dokt, stride_dqat, total,
                                BLOCK_M, BLOCK_N, True, IS_FP8, QK_BF16, FP8_MMA, PART, DQ_FUSED)
        for m in range(full_lo, full_hi):
            dk, dv = _dkdv_tile(dk, dv, k, v, c_k, sv_n, q_ptrs, do_ptrs, qk_ptrs, dok_ptrs,
                                qrow_ptrs, lse_ptrs, delta_ptrs, dqa_ptrs, sem_ptrs,
                                seg_start_ptr, tile, offs_n, seg_end_n, query0 + m * BLOCK_M,
                                stride_qt, stride_dot, stride_qkt, stride_dokt, stride_dqat, total,
                                BLOCK_M, BLOCK_N, False, IS_FP8, QK_BF16, FP8_MMA, PART, DQ_FUSED)
        for m in range(full_hi, hi):
            dk, dv = _dkdv_tile(dk, dv, k, v, c_k, sv_n, q_ptrs, do_ptrs, qk_ptrs, dok_ptrs,
                                qrow_ptrs, lse_ptrs, delta_ptrs, dqa_ptrs, sem_ptrs,
                                seg_start_ptr, tile, offs_n, seg_end_n, query0 + m * BLOCK_M,
                                stride_qt, stride_dot, stride_qkt, stride_dokt, stride_dqat, total,
                                BLOCK_M, BLOCK_N, True, IS_FP8, QK_BF16, FP8_MMA, PART, DQ_FUSED)

    if PART != 1:
        dk = dk * sm_scale
        tl.store(dk_ptr + offs_n.to(tl.int64)[:, None] * stride_dkt + kv_head * stride_dkh
                 + offs_d[None, :], _bf16(dk), mask=col_ok[:, None])
    if PART != 2:
        tl.store(dv_ptr + offs_n.to(tl.int64)[:, None] * stride_dvt + kv_head * stride_dvh
                 + offs_d[None, :], _bf16(dv), mask=col_ok[:, None])


# ------------------------------------------------------------------------------------------
# Backward: dQ over query tiles
# ------------------------------------------------------------------------------------------


@triton.jit
def _dq_tile(dq, q, do, c_q, sdo, lse, delta, k_ptrs, v_ptrs, kk_ptrs, skv_ptrs, offs_m,
             seg_start_m, start_n, stride_kt, stride_vt, stride_kkt, total,
             BLOCK_N: tl.constexpr, MASKED: tl.constexpr, IS_FP8: tl.constexpr,
             QK_BF16: tl.constexpr, FP8_MMA: tl.constexpr):
    offs_n = start_n + tl.arange(0, BLOCK_N)
    shift = tl.cast(start_n, tl.int64)
    key_ok = offs_n < total  # used by masked tiles only
    kT = _load(k_ptrs + shift * stride_kt, key_ok[None, :], 0.0, MASKED)  # [D, BLOCK_N]
    vT = _load(v_ptrs + shift * stride_vt, key_ok[None, :], 0.0, MASKED)  # [D, BLOCK_N]
    if IS_FP8:
        sk, sv = _key_scales(skv_ptrs, offs_n, key_ok, MASKED)
    else:
        sk = None
        sv = None
    # Base-2 logits y * c_q[:, None] and dP - delta as one FMA per element each (see _fwd_tile).
    y = _rhs_scaled_dot(q, kT, sk, IS_FP8, QK_BF16, FP8_MMA)
    if IS_FP8 and FP8_MMA != 2:
        # dP = (dO8 V8^T sdO) sV: the reference's and the dK/dV kernels' order (the same bits
        # either way for E8M0 scales; fp8_rowwise's fp32 ones round once per product)
        yd = _dot8(do, vT, FP8_MMA) * sdo[:, None]
    else:
        yd = _rhs_scaled_dot(do, vT, sv, IS_FP8, False, FP8_MMA)
    p = tl.math.exp2(y * c_q[:, None] - lse[:, None])
    if MASKED:
        visible = (offs_n[None, :] >= seg_start_m[:, None]) & (offs_n[None, :] <= offs_m[:, None])
        p = tl.where(visible, p, 0.0)
    if IS_FP8 and FP8_MMA != 2:
        ds = p * (yd * sv[None, :] - delta[:, None])
    elif IS_FP8:  # MX MMA: sV inside it; dP = yd * sdO (a power of two: exact)
        ds = p * (yd * sdo[:, None] - delta[:, None])
    else:
        ds = p * (yd - delta[:, None])
    if IS_FP8:  # dQ = dS K over the key axis; K read from its token-contiguous copy
        k_k = tl.load(kk_ptrs + shift * stride_kkt)  # zero-padded: no token-axis mask
        dq = dq + _quantized_row_dot(ds, sk, k_k, QK_BF16, FP8_MMA)
    else:
        dq = _dot(_bf16(ds), tl.trans(kT), dq)
    return dq


@triton.autotune(configs=_configs(), key=["HEAD_DIM", "H_Q", "H_KV", "IS_FP8", "QK_BF16",
                                          "FP8_MMA", "DOC_TILES"])
@triton.jit
def _attn_bwd_dq_kernel(
    q_ptr, k_ptr, v_ptr, do_ptr, kk_ptr, sq_ptr, skv_ptr, sdo_ptr, lse_ptr, delta_ptr,
    dq_ptr, seg_start_ptr, seg_end_ptr, order_ptr,
    stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh, stride_dot, stride_doh,
    stride_kkt, stride_kkh, stride_kkd, stride_sqh, stride_skh, stride_dqt, stride_dqh, stride_lh,
    total, qk_scale, sm_scale,
    H_Q: tl.constexpr, H_KV: tl.constexpr, HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, IS_FP8: tl.constexpr, QK_BF16: tl.constexpr,
    FP8_MMA: tl.constexpr, DOC_TILES: tl.constexpr,
):
    entry = tl.load(order_ptr + tl.program_id(1))
    if DOC_TILES:
        if entry < 0:  # past the last tile
            return
    head, kv_head, start_m, offs_m, row_ok, seg_start_m, last_row = _query_tile(
        entry, seg_start_ptr, seg_end_ptr, total, H_Q, H_KV, BLOCK_M, DOC_TILES)
    offs_d = tl.arange(0, HEAD_DIM)
    rows64 = offs_m.to(tl.int64)[:, None]
    q = tl.load(q_ptr + rows64 * stride_qt + head * stride_qh + offs_d[None, :],
                mask=row_ok[:, None], other=0.0)
    do = tl.load(do_ptr + rows64 * stride_dot + head * stride_doh + offs_d[None, :],
                 mask=row_ok[:, None], other=0.0)
    lse = tl.load(lse_ptr + head * stride_lh + offs_m, mask=row_ok, other=0.0)
    delta = tl.load(delta_ptr + head * stride_lh + offs_m, mask=row_ok, other=0.0)
    if IS_FP8:  # c_q: per-row factor of the logits (see _rhs_scaled_dot)
        c_q = tl.load(sq_ptr + head * stride_sqh + offs_m, mask=row_ok, other=1.0) * qk_scale
        sdo = tl.load(sdo_ptr + head * stride_sqh + offs_m, mask=row_ok, other=1.0)
    else:
        c_q = tl.full([BLOCK_M], qk_scale, tl.float32)
        sdo = None
    cols = tl.arange(0, BLOCK_N).to(tl.int64)
    k_ptrs = k_ptr + kv_head * stride_kh + offs_d[:, None] + cols[None, :] * stride_kt
    v_ptrs = v_ptr + kv_head * stride_vh + offs_d[:, None] + cols[None, :] * stride_vt
    kk_ptrs = (kk_ptr + kv_head * stride_kkh + offs_d[None, :].to(tl.int64) * stride_kkd
               + cols[:, None] * stride_kkt)
    skv_ptrs = skv_ptr + kv_head * stride_skh

    key0, lo, full_lo, full_hi, hi = _key_tile_ranges(seg_start_ptr, start_m, last_row, BLOCK_N,
                                                      DOC_TILES)

    dq = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    for n in range(lo, full_lo):
        dq = _dq_tile(dq, q, do, c_q, sdo, lse, delta, k_ptrs, v_ptrs, kk_ptrs, skv_ptrs,
                      offs_m, seg_start_m, key0 + n * BLOCK_N, stride_kt, stride_vt, stride_kkt,
                      total, BLOCK_N, True, IS_FP8, QK_BF16, FP8_MMA)
    for n in range(full_lo, full_hi):
        dq = _dq_tile(dq, q, do, c_q, sdo, lse, delta, k_ptrs, v_ptrs, kk_ptrs, skv_ptrs,
                      offs_m, seg_start_m, key0 + n * BLOCK_N, stride_kt, stride_vt, stride_kkt,
                      total, BLOCK_N, False, IS_FP8, QK_BF16, FP8_MMA)
    for n in range(full_hi, hi):
        dq = _dq_tile(dq, q, do, c_q, sdo, lse, delta, k_ptrs, v_ptrs, kk_ptrs, skv_ptrs,
                      offs_m, seg_start_m, key0 + n * BLOCK_N, stride_kt, stride_vt, stride_kkt,
                      total, BLOCK_N, True, IS_FP8, QK_BF16, FP8_MMA)
    dq = dq * sm_scale
    tl.store(dq_ptr + rows64 * stride_dqt + head * stride_dqh + offs_d[None, :],
             _bf16(dq), mask=row_ok[:, None])


# ------------------------------------------------------------------------------------------
# Launchers
# ------------------------------------------------------------------------------------------


# Output allocator: tests replace it with a NaN-filled allocation to prove that every output
# element is written.
empty = torch.empty


FP8_MMA_MODES = ("fast", "precise", "mx")


def fp8_mma_mode() -> int:
    """How the E4M3 products run (FLAMIA_FP8_MMA, read at every launch so one process can compare):
    "fast": Hopper FP8 MMA with its native accumulation within each tile's MMA chain, per-token
    scales on the fp32 result (default below compute capability 10); "precise": the same with a
    promotion to fp32 every 32 products (see _dot8); "mx": block-scaled MMAs (tl.dot_scaled, the
    same bytes with E8M0 block scales: Blackwell's MX MMA, the default from capability 10 on;
    emulated by triton elsewhere; its speed is unmeasured here, there is no Blackwell GPU)."""
    mode = os.environ.get("FLAMIA_FP8_MMA")
    if mode is None:
        blackwell = cuda_major() >= 10
        mode = "mx" if blackwell and not INTERPRET else "fast"
    if mode not in FP8_MMA_MODES:
        raise ValueError(f"FLAMIA_FP8_MMA={mode!r}; accepted: {FP8_MMA_MODES}")
    return FP8_MMA_MODES.index(mode)


DKDV_MODES = ("split", "fused")


def dkdv_parts(is_fp8: bool) -> tuple[int, ...]:
    """The dK/dV kernel launches (PART values) of one backward. FP8 recipes run two kernels by
    default, one for dV (S^T, P'^T and one MMA into dV) and one for dK (S^T, dP^T, dS'^T and one
    MMA into dK): one accumulator each instead of two, at the price of recomputing S^T. In the
    fused kernel the two fp32 accumulators, the S^T / dP^T tiles and the per-query vectors do
    not fit in 255 registers and spill (bench/sass_report.py; Nsight Compute on the H200:
    long-scoreboard stalls on local memory dominate it, bench/ncu_attention.py).
    FLAMIA_FP8_DKDV=fused|split chooses (read at every launch); BF16 always runs one kernel."""
    mode = os.environ.get("FLAMIA_FP8_DKDV", "split")
    if mode not in DKDV_MODES:
        raise ValueError(f"FLAMIA_FP8_DKDV={mode!r}; accepted: {DKDV_MODES}")
    return (1, 2) if is_fp8 and mode == "split" else (0,)


DQ_MODES = ("separate", "fused")


def dq_fused(is_fp8: bool) -> bool:
    """Whether dQ is accumulated by the dK/dV kernel (BF16 only): FLAMIA_DQ=fused|separate, read
    at every launch and by the batch plan (the fused mode needs its own dK/dV launch order).
    "separate": a dQ kernel over query tiles recomputes S and dP (7 matmuls per backward step
    pair instead of 5) and sums dQ in registers. "fused": the dK/dV kernel adds dS K of each
    (key tile, query tile) pair into an fp32 dQ accumulator in memory, in increasing key-tile
    order per query tile (_ordered_dq_add), so the result is deterministic."""
    mode = os.environ.get("FLAMIA_DQ", "separate")
    if mode not in DQ_MODES:
        raise ValueError(f"FLAMIA_DQ={mode!r}; accepted: {DQ_MODES}")
    return mode == "fused" and not is_fp8


DELTA_MODES = ("dq", "kernel")


def delta_mode() -> str:
    """Where BF16's delta = rowsum(dO * O) comes from when the Gluon dQ kernel runs (separate
    dQ, Hopper): "dq" (the default since 2026-12-06, eleventh session) computes it in that
    kernel from the dO tile it loads anyway and its rows of O, with the delta kernel's bits
    (attention_hopper._row_delta), and runs it before the dK/dV kernel, which reads the delta
    it wrote: one pass over dO and one launch fewer per backward. "kernel": the delta kernel,
    then dK/dV, then dQ (the order before). FLAMIA_DELTA, read at every launch. The triton
    kernels, the fused-dQ mode, the FP8 recipes (whose dO quantizer computes delta) and a
    non-contiguous O always run the delta (or prep) kernel."""
    mode = os.environ.get("FLAMIA_DELTA", "dq")
    if mode not in DELTA_MODES:
        raise ValueError(f"FLAMIA_DELTA={mode!r}; accepted: {DELTA_MODES}")
    return mode


TILE_MODES = ("grid", "doc")


def doc_tiles(is_fp8: bool = False) -> bool:
    """Whether the BF16 kernels tile each document from its own start ("doc") instead of the
    packed grid ("grid", the default): FLAMIA_TILES, read at every launch and by the batch plan.
    Grid tiles cover [m * BLOCK_M, (m + 1) * BLOCK_M) of the packed rows whatever segments they
    hold; a tile holding the end of one document and the start of the next visits all of the
    first one's key tiles with a mask (the second one's rows see none of them), so with short
    documents most steps are masked. Doc tiles start at a segment start (plus multiples of the
    tile size), in place in the packed layout (no repacking, no padding): a tile's rows are
    one segment's, its key tiles start at that segment's start too, and only the diagonal tiles
    are masked; the rows of a segment's last tile that lie past its end belong to the next
    segment and are never stored (that tile's program computes them for nothing). Work model
    (python -m bench.tile_model, CPU, the Gluon kernels' tiles): U(32, 1024) takes 10% fewer
    forward steps than on the grid, 58% fewer of them masked (dK/dV: 11% and 34% fewer);
    lognormal 1k 2% and 53% fewer (dK/dV 2%, 23%); one document the same steps. Measured
    (H100, 2026-12-05, one process): U(32, 1024) 1.66 vs 1.69 ms fwd+bwd, lognormal 1k 3.34 vs
    3.30, one document 8.90 vs 8.53: masked steps are not where the time goes; opt-in. The FP8
    recipes keep grid tiles: their in-register scale groups are the packed grid's 64-token
    groups (recipes.Recipe.inreg_group), the tiles of their kernels. Doc tiles need separate
    dQ (FLAMIA_DQ=separate): the fused dQ's ordered adds rank key tiles on the grid."""
    mode = os.environ.get("FLAMIA_TILES", "grid")
    if mode not in TILE_MODES:
        raise ValueError(f"FLAMIA_TILES={mode!r}; accepted: {TILE_MODES}")
    if mode == "doc" and dq_fused(is_fp8):
        raise ValueError("FLAMIA_TILES=doc runs with FLAMIA_DQ=separate only (the fused dQ adds "
                         "its parts in the packed grid's key-tile order)")
    return mode == "doc" and not is_fp8


ORDER_MODES = ("grouped", "longest")


def launch_order() -> str:
    """How the batch plan orders the tiles of a launch: FLAMIA_ORDER, read by the batch plan.
    "longest": by work alone, longest first (LPT). "grouped" (the default): tiles that read the
    same operand tiles (query tiles with the same first key tile, key tiles with the same last
    query tile: one document's tiles) launch next to each other, longest first inside a group,
    and the groups by their longest tile, longest first. On one document both are the same
    order; on short documents LPT scatters a document's tiles over the whole launch, so each
    of them reads the document's K/V (or Q/dO) from DRAM again: Nsight Compute on U(32, 1024),
    H100, 2026-12-05, the BF16 forward moved 2.4x the bytes of cuDNN THD's at 83% of DRAM
    bandwidth (bench/results/ncu_shortdocs_20261205_H100.txt)."""
    mode = os.environ.get("FLAMIA_ORDER", "grouped")
    if mode not in ORDER_MODES:
        raise ValueError(f"FLAMIA_ORDER={mode!r}; accepted: {ORDER_MODES}")
    return mode


def _check_key_scales(skv: torch.Tensor) -> torch.Tensor:
    assert skv.dim() == 3 and skv.shape[-1] == KROW and skv.is_contiguous(), (
        f"key scales must be a contiguous [Hkv, T, {KROW}] tensor (quantize.quantize_qkv), "
        f"got shape {tuple(skv.shape)}, strides {skv.stride()}")
    return skv


def _check_unit_d(*ts):
    for t in ts:
        assert t.stride(-1) == 1, "head dim must be contiguous"


def attention_fwd(q, k, v, seg_start, order_fwd, softmax_scale, fp8=None, seg_end=None,
                  short_docs=False):
    """O [T, Hq, D] bf16 and lse2 [Hq, T] float32. ``order_fwd``: launch order of the query tiles
    of size ``fwd_blocks(D, fp8 is not None, short_docs)[0]`` (with doc tiles, see doc_tiles,
    their first rows, and ``seg_end`` is needed); ``short_docs``: see fwd_short_docs (the plan's
    and this call's must agree).

    BF16: q, k, v bf16 [T, H, D]. FP8 (``fp8`` given): q, k are the E4M3 tensors [T, H, D], and
    ``fp8`` = {"sq": Q's scales [Hq, T], "skv": K's and V's scales as rows [Hkv, T, KROW]
    (contiguous, as quantize.quantize_qkv writes them), "vt": V's token-contiguous copy [Hkv, D, T_pad],
    "qk_bf16": Q and K data held in bf16 (nvfp4_fp8)}.
    """
    _check_unit_d(q, k)
    total, hq, d = q.shape
    hkv = k.shape[1]
    o = empty((total, hq, d), dtype=torch.bfloat16, device=q.device)
    lse = empty((hq, total), dtype=torch.float32, device=q.device)
    block_m, block_n = fwd_blocks(d, fp8 is not None, short_docs)
    doc = doc_tiles(fp8 is not None)
    if doc and seg_end is None:
        raise ValueError("attention_fwd with doc tiles (FLAMIA_TILES=doc) needs seg_end")
    if fwd_kernel(fp8 is not None) == "gluon":
        from . import attention_hopper
        if fp8 is None:
            why = attention_hopper.supports(q=q, k=k, v=v)
            if _gluon_takes("FLAMIA_FWD_KERNEL", why):
                return attention_hopper.attention_fwd_hopper(q, k, v, seg_start, order_fwd,
                                                             softmax_scale, o, lse, seg_end, doc,
                                                             short_docs, checked=True)
            # The triton forward takes over, if the plan's query tiles (the Gluon ones) fit it.
            triton_m, block_n = _blocks("fwd", d, False)
            if triton_m != block_m:
                raise ValueError(f"Gluon forward: {why}; the triton forward runs {triton_m}-query "
                                 f"tiles, the batch plan has {block_m} (FLAMIA_GLUON_FWD)")
        else:  # only when asked for (fwd_kernel), so inputs it cannot take are an error
            _gluon_takes("FLAMIA_FWD_KERNEL", attention_hopper.supports(fp8=("q", "k"), q=q, k=k)
                         or _gluon_fp8_mma())
            return attention_hopper.attention_fwd8_hopper(
                q, k, fp8["vt"], fp8["sq"], _check_key_scales(fp8["skv"]), seg_start, order_fwd,
                softmax_scale, o, lse)
    if fp8 is None:
        _check_unit_d(v)
        sq = skv = lse  # unused (IS_FP8=False)
        v_args = (v, v.stride(0), v.stride(1), 1)
        s_strides = (0, 0)
    else:
        sq, skv, vt = fp8["sq"], _check_key_scales(fp8["skv"]), fp8["vt"]
        v_args = (vt, 1, vt.stride(0), vt.stride(1))
        s_strides = (sq.stride(0), skv.stride(0))
    grid = (hq, order_fwd.numel())
    _attn_fwd_kernel[grid](
        q, k, v_args[0], sq, skv, o, lse, seg_start, seg_start if seg_end is None else seg_end,
        order_fwd,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), *v_args[1:], *s_strides,
        o.stride(0), o.stride(1), lse.stride(0), total, softmax_scale * LOG2E,
        H_Q=hq, H_KV=hkv, HEAD_DIM=d, BLOCK_M=block_m, BLOCK_N=block_n, IS_FP8=fp8 is not None,
        QK_BF16=fp8 is not None and fp8.get("qk_bf16", False),
        FP8_MMA=fp8_mma_mode() if fp8 is not None else 0, DOC_TILES=doc,
    )
    return o, lse


def _gluon_dq_takes(q, k, v, do, is_fp8: bool) -> bool:
    """Whether the Gluon dQ kernel runs (dq_kernel, then _gluon_takes on these inputs)."""
    if dq_kernel(is_fp8) != "gluon":
        return False
    from . import attention_hopper
    tiles, gluon_tiles = dq_blocks(q.shape[-1], is_fp8), attention_hopper.DQ_CONFIG[:2]
    return _gluon_takes("FLAMIA_DQ_KERNEL", attention_hopper.supports(q=q, k=k, v=v, do=do) or (
        None if tiles == gluon_tiles else
        f"dQ tiles {tiles} (FLAMIA_DQ_BLOCKS), the Gluon kernel's are {gluon_tiles}"))


def _gluon_dq(q, k, v, do, lse, delta, seg_start, seg_end, order_dq, softmax_scale, dq, o, doc):
    """The Gluon dQ kernel into dq; with ``o`` it also computes delta and writes it to delta."""
    from . import attention_hopper
    attention_hopper.attention_dq_hopper(q, k, v, do, lse, delta, seg_start, order_dq,
                                         softmax_scale, dq, seg_end, doc, o=o, checked=True)


def attention_bwd(do, q, k, v, o, lse, seg_start, seg_end, order_dkdv, order_dq, softmax_scale,
                  fp8=None):
    """dq, dk, dv (bf16, shapes of q, k, v).

    ``do``, ``o``: bf16 [T, Hq, D] (delta = rowsum(dO * O) is computed from them; FP8: from the
    quantized dO' = do8 * sdo, the dO that dP sees). BF16: q, k, v bf16. FP8 (``fp8`` given):
    q, k, v are the E4M3 tensors and ``fp8`` = {"qt", "kt": token-contiguous copies
    [H, D, T_pad] of Q, K (zero-padded, see quantize.token_major_copy); "sq": Q's scales
    [Hq, T]; "skv": K's and V's scales [Hkv, T, KROW] (see attention_fwd); optionally "do8",
    "dot", "sdo": dO quantized by the caller (E4M3, its token-contiguous copy, scales [Hq, T]);
    optionally "fp32_scale": True for fp8_rowwise (dO gets an fp32 scale amax / 448, not E8M0);
    without them dO is quantized here, in one kernel with delta (_attn_bwd_prep8_kernel) where
    the quantizer writes the token-major copy itself (FLAMIA_FP8_TRANSPOSE=fused, the
    default)}. The FP8 dK/dV kernels read lse2, delta, sQ, sdO as rows of one [Hq, T, QROW]
    array that the delta (or prep) kernel writes.
    """
    do = do if do.stride(-1) == 1 else do.contiguous()
    _check_unit_d(q, k, v, o)
    total, hq, d = q.shape
    hkv = k.shape[1]
    # delta = rowsum(dO * O) in fp32 (FlashAttention), from the dO that dP is computed from.
    delta = empty((hq, total), dtype=torch.float32, device=q.device)
    is_fp8 = fp8 is not None
    qk_bf16 = is_fp8 and fp8.get("qk_bf16", False)  # nvfp4_fp8: Q, K data held in bf16
    fp32_scale = is_fp8 and fp8.get("fp32_scale", False)  # fp8_rowwise
    prep = False  # dO quantized together with delta (_attn_bwd_prep8_kernel)
    if is_fp8:
        qt, kt = fp8["qt"], fp8["kt"]
        sq, skv = fp8["sq"], _check_key_scales(fp8["skv"])
        qrow = empty((hq, total, QROW), dtype=torch.float32, device=q.device)
        tcopy = lambda t: (1, t.stride(0), t.stride(1))  # token, head, dim strides of [H, D, T_pad]
        s_strides = (sq.stride(0), skv.stride(0))
        if "do8" in fp8:
            do_in, dot, sdo = fp8["do8"], fp8["dot"], fp8["sdo"]
        elif quantize.transpose_mode() == "fused":
            do_in, dot, sdo = quantize.mx_token_buffers(do)
            prep = True
        else:
            quantizer = quantize.quantize_fp32_token if fp32_scale else quantize.quantize_mx_token
            do_in, dot, sdo = quantizer(do)
    else:
        do_in = do
        qt = kt = dot = q  # unused (IS_FP8=False)
        sq = skv = sdo = qrow = delta
        tcopy = lambda t: (0, 0, 0)
        s_strides = (0, 0)
    assert sdo.stride(0) == sq.stride(0) == lse.stride(0) == delta.stride(0)
    fused_dq = dq_fused(is_fp8)
    doc = doc_tiles(is_fp8)
    gluon_dq = not fused_dq and _gluon_dq_takes(q, k, v, do, is_fp8)
    # The Gluon dQ kernel computes delta itself and runs first (delta_mode): no delta kernel.
    # (delta_mode first: a bad FLAMIA_DELTA is refused whichever kernels run.)
    delta_in_dq = delta_mode() == "dq" and gluon_dq and o.is_contiguous()
    grads = [empty(t.shape, dtype=torch.bfloat16, device=q.device) for t in (q, k, v)]
    dq, dk, dv = grads
    # The quantizer's tiles; with its transposed store (prep) they cover T_pad.
    block_t, tiles = quantize.quantizer_grid(total, prep)
    if delta_in_dq:
        _gluon_dq(q, k, v, do, lse, delta, seg_start, seg_end, order_dq, softmax_scale, dq, o,
                  doc)
    elif prep:
        assert do.dtype == torch.bfloat16 and o.stride(-1) == 1
        _attn_bwd_prep8_kernel[(tiles, hq)](
            do, o, do_in, sdo, dot, lse, sq, delta, qrow, do.stride(0), do.stride(1),
            o.stride(0), o.stride(1), do_in.stride(0), do_in.stride(1), delta.stride(0),
            qrow.stride(0), dot.stride(0), dot.stride(1), total, HEAD_DIM=d, BLOCK_T=block_t,
            FP32_SCALE=fp32_scale, num_warps=4,
        )
    else:
        _attn_bwd_delta_kernel[(tiles, hq)](
            o, do_in, sdo, lse, sq, delta, qrow, o.stride(0), o.stride(1), do_in.stride(0),
            do_in.stride(1), delta.stride(0), qrow.stride(0), total, HEAD_DIM=d,
            BLOCK_T=block_t, IS_FP8=is_fp8,
        )
    qk_scale = softmax_scale * LOG2E
    fp8_mma = fp8_mma_mode() if is_fp8 else 0
    bm, bn = bwd_blocks(d, is_fp8)
    if fused_dq:  # fp32 dQ accumulator and one counter per (query head, query tile)
        dqa = torch.zeros((total, hq, d), dtype=torch.float32, device=q.device)
        sem = torch.zeros((hq, triton.cdiv(total, bm)), dtype=torch.int32, device=q.device)
    gluon_dkdv = False
    dkdv_choice = dkdv_kernel(is_fp8)
    if is_fp8 and dkdv_choice == "gluon":
        from . import attention_hopper
        gluon_tiles = attention_hopper.DKDV8_CONFIG[:2]
        gluon_dkdv = _gluon_takes("FLAMIA_DKDV_KERNEL", _gluon_fp8_mma() or (
            None if (bm, bn) == gluon_tiles else f"dK/dV tiles {(bm, bn)} (FLAMIA_BWD_BLOCKS), "
            f"the Gluon FP8 kernel's are {gluon_tiles}") or attention_hopper.dkdv8_supports(
            q, k, v, do_in, qt, dot))
        if gluon_dkdv:
            attention_hopper.attention_dkdv8_hopper(q, k, v, do_in, qt, dot, qrow, skv, seg_end,
                                                    order_dkdv, softmax_scale, dk, dv,
                                                    checked=True)
    elif dkdv_choice == "gluon":
        from . import attention_hopper
        gluon_tiles = attention_hopper.DKDV_CONFIG[:2]
        why = attention_hopper.supports(q=q, k=k, v=v, do=do) or (
            None if (bm, bn) == gluon_tiles else
            f"dK/dV tiles {(bm, bn)} (FLAMIA_BWD_BLOCKS), the Gluon kernel's are {gluon_tiles}")
        gluon_dkdv = _gluon_takes("FLAMIA_DKDV_KERNEL", why)
        if gluon_dkdv:
            attention_hopper.attention_dkdv_hopper(
                q, k, v, do, lse, delta, seg_start, seg_end, order_dkdv, softmax_scale, dk, dv,
                *((dqa, sem) if fused_dq else (None, None)), doc_tiles=doc, checked=True)
    if not gluon_dkdv:
        if not fused_dq:
            # unused by the triton dK/dV kernel; own tensors, as the autotuner zeroes them
            # (reset_to_zero) between runs (allocated here only: two allocations of host time
            # that the Gluon path does not need)
            dqa = torch.empty((1, 1, 1), dtype=torch.float32, device=q.device)
            sem = torch.empty((1, 1), dtype=torch.int32, device=q.device)
        for part in dkdv_parts(is_fp8):
            _attn_bwd_dkdv_kernel[(hkv, order_dkdv.numel())](
                q, k, v, do_in, qt, dot, qrow, skv, lse, delta, dk, dv, dqa, sem, seg_start,
                seg_end, order_dkdv,
                q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1),
                do_in.stride(0), do_in.stride(1), *tcopy(qt), *tcopy(dot), qrow.stride(0),
                s_strides[1], dk.stride(0), dk.stride(1), dv.stride(0), dv.stride(1),
                lse.stride(0), dqa.stride(0), dqa.stride(1), sem.stride(0), total, qk_scale,
                softmax_scale, H_Q=hq, H_KV=hkv, HEAD_DIM=d, BLOCK_M=bm, BLOCK_N=bn,
                IS_FP8=is_fp8, QK_BF16=qk_bf16, FP8_MMA=fp8_mma, PART=part, DQ_FUSED=fused_dq,
                DOC_TILES=doc,
            )
    if fused_dq:
        # The dQ kernel's last step, on the accumulated sum: scale in fp32, round to bf16.
        dq.copy_(dqa.mul_(softmax_scale))
        return dq, dk, dv
    if delta_in_dq:
        return dq, dk, dv
    if gluon_dq:
        _gluon_dq(q, k, v, do, lse, delta, seg_start, seg_end, order_dq, softmax_scale, dq, None,
                  doc)
        return dq, dk, dv
    bm, bn = dq_blocks(d, is_fp8)
    _attn_bwd_dq_kernel[(hq, order_dq.numel())](
        q, k, v, do_in, kt, sq, skv, sdo, lse, delta, dq, seg_start, seg_end, order_dq,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1),
        do_in.stride(0), do_in.stride(1), *tcopy(kt), *s_strides,
        dq.stride(0), dq.stride(1), lse.stride(0), total, qk_scale, softmax_scale,
        H_Q=hq, H_KV=hkv, HEAD_DIM=d, BLOCK_M=bm, BLOCK_N=bn, IS_FP8=is_fp8, QK_BF16=qk_bf16,
        FP8_MMA=fp8_mma, DOC_TILES=doc,
    )
    return dq, dk, dv
