"""Triton kernels against the oracle. Interpreter tier (CPU, TRITON_INTERPRET=1 set by conftest,
tiny shapes, 32x32 tiles) and GPU tier (marked gpu, real tiles, awkward long segments)."""

import pytest
import torch

import flamia
from flamia.kernels import attention as K
from flamia.probes import adversarial_cu_seqlens, probe_attention
from flamia.reference import attention_forward_backward, exact_attention

from conftest import DEVICE, rand_qkvdo
from test_reference import naive_attention

CPU_CASES = [  # (segment lengths, Hq, Hkv, D)
    ([1, 7, 129, 63, 100], 2, 2, 64),  # boundaries off the tile grid, a length-1 document
    ([33, 1, 95], 4, 2, 64),  # GQA, diagonal tiles holding several documents
    ([70, 58], 2, 1, 128),  # D = 128, MQA
]
GPU_CASES = [  # real tiles (128 x 64 forward); few head configs: each one is an autotune
    ([1, 7, 129, 1000, 4001, 63], 16, 4, 128),
    ([1, 7, 129, 1000, 4001, 63], 8, 2, 64),
    ([300] * 20 + [37, 8192], 16, 4, 128),
]


def _cu(lengths, device):
    cu = torch.zeros(len(lengths) + 1, dtype=torch.int32)
    cu[1:] = torch.cumsum(torch.tensor(lengths), 0)
    return cu.to(device)


HQ = 8 if DEVICE == "cuda" else 4  # query heads of the single-config tests (Hkv = 2)


def _triton(q, k, v, cu):
    return flamia.attention(q, k, v, cu, q.shape[0], recipe="bf16", impl="triton")


@pytest.fixture
def poisoned(monkeypatch):
    """Every output of the kernels starts as NaN: an unwritten element fails the comparison."""
    nan = lambda shape, **kw: torch.full(shape, float("nan"), **kw)
    monkeypatch.setattr(K, "empty", nan)


def _check_flash_attention_rule(lengths, hq, hkv, d, device, seed=0):
    total = sum(lengths)
    cu = _cu(lengths, device)
    q, k, v, do = rand_qkvdo(total, hq, hkv, d, seed=seed, device=device)
    ref = attention_forward_backward(exact_attention, q, k, v, do.double(), cu)
    torch_bf16 = attention_forward_backward(naive_attention, q, k, v, do, cu)
    ours = attention_forward_backward(_triton, q, k, v, do, cu)
    for name, a, b, r in zip("O dQ dK dV".split(), ours, torch_bf16, ref):
        assert a.dtype == torch.bfloat16 and a.shape == b.shape
        assert torch.isfinite(a).all(), f"{name}: non-finite (unwritten?) elements"
        err = (a.double() - r).abs().max().item()
        base = (b.double() - r).abs().max().item()
        assert err <= 2 * base + 1e-5, f"{name}: max err {err} > 2 * {base} + 1e-5"


@pytest.mark.interpret
@pytest.mark.parametrize("tiles", K.TILE_MODES)
@pytest.mark.parametrize("lengths,hq,hkv,d", CPU_CASES)
def test_bf16_kernel_flash_attention_rule_interpreter(lengths, hq, hkv, d, tiles, poisoned,
                                                      monkeypatch):
    if DEVICE == "cuda":
        pytest.skip("interpreter tier; the gpu tier covers this on CUDA")
    monkeypatch.setenv("FLAMIA_TILES", tiles)
    _check_flash_attention_rule(lengths, hq, hkv, d, "cpu")


@pytest.mark.gpu
@pytest.mark.parametrize("tiles", K.TILE_MODES)
@pytest.mark.parametrize("lengths,hq,hkv,d", GPU_CASES)
def test_bf16_kernel_flash_attention_rule_gpu(lengths, hq, hkv, d, tiles, poisoned, monkeypatch):
    monkeypatch.setenv("FLAMIA_TILES", tiles)
    _check_flash_attention_rule(lengths, hq, hkv, d, "cuda")


def test_bf16_kernel_close_to_reference_recipe():
    """Same recipe (bf16 P and dS, integer base-2 max): kernel and reference differ only by fp32
    accumulation order, so at most one bf16 rounding step apart (2^-7 relative)."""
    lengths = [1, 7, 129, 63, 100] if DEVICE == "cpu" else [1, 7, 129, 1000, 4001, 63]
    cu = _cu(lengths, DEVICE)
    q, k, v, do = rand_qkvdo(sum(lengths), HQ, 2, 64, seed=3, device=DEVICE)
    ours = attention_forward_backward(_triton, q, k, v, do, cu)
    ref = attention_forward_backward(flamia.reference_attention, q, k, v, do, cu, recipe="bf16")
    for name, a, b in zip("O dQ dK dV".split(), ours, ref):
        rel = (a.float() - b.float()).norm() / b.float().norm()
        assert rel < 4e-3, f"{name}: relative difference {rel:.2e} to the reference recipe"


@pytest.mark.parametrize("dq_mode,tiles", [("separate", "grid"), ("fused", "grid"),
                                           ("separate", "doc")])
def test_bf16_kernel_does_not_leak(dq_mode, tiles, monkeypatch):
    monkeypatch.setenv("FLAMIA_DQ", dq_mode)
    monkeypatch.setenv("FLAMIA_TILES", tiles)
    total = 192 if DEVICE == "cpu" else 2048
    cu = adversarial_cu_seqlens(total, device=DEVICE)
    q, k, v, do = rand_qkvdo(total, HQ, 2, 64, seed=4, device=DEVICE)
    res = probe_attention(_triton, q, k, v, cu, do, max_targets=3)
    for r in res.values():
        assert r.n_compared > 0
        assert r.max_abs_delta == 0.0, str(r)


def _assert_grouped_longest_first(works, groups):
    """works / groups: per launched tile, in launch order. Each group's tiles are next to each
    other, longest first, and the groups come by their longest tile, longest first."""
    runs = []
    for work, group in zip(works, groups):
        if runs and runs[-1][0] == group:
            assert work <= runs[-1][1][-1], (works, groups)
            runs[-1][1].append(work)
        else:
            runs.append((group, [work]))
    assert len({group for group, _ in runs}) == len(runs), f"a group is split: {groups}"
    longest = [run[0] for _, run in runs]
    assert longest == sorted(longest, reverse=True), (works, groups)


@pytest.mark.parametrize("mode", K.ORDER_MODES)
def test_batch_plan_orders_tiles(mode, monkeypatch):
    """Every tile once; FLAMIA_ORDER=longest: by work, longest first; grouped: one document's
    tiles (same first key tile for query tiles, same last query tile for key tiles) together,
    longest first, groups by their longest tile; on one document both are the same order."""
    from flamia.ops import batch_plan

    monkeypatch.setenv("FLAMIA_ORDER", mode)
    lengths = [1, 7, 129, 63, 100, 420, 3, 300, 77]
    total = sum(lengths)
    plan = batch_plan(_cu(lengths, DEVICE), total, 64)
    seg_start, seg_end = plan.seg_start.tolist(), plan.seg_end.tolist()
    assert seg_start[0] == 0 and seg_start[8] == 8 and seg_start[299] == 200
    assert seg_end[8] == 137
    (fm, fn), (bm, bn), (qm, qn) = K.plan_blocks(64)

    def query_tiles(order, block_m, block_n):
        lo = [seg_start[t * block_m] // block_n for t in order]
        hi = [-(-min(t * block_m + block_m, total) // block_n) for t in order]
        return [h - low for low, h in zip(lo, hi)], lo

    def key_tiles(order):
        hi = [-(-seg_end[min(t * bn + bn, total) - 1] // bm) for t in order]
        return [h - t * bn // bm for t, h in zip(order, hi)], hi

    tiles = ((plan.order_fwd, lambda o: query_tiles(o, fm, fn)), (plan.order_dkdv, key_tiles),
             (plan.order_dq, lambda o: query_tiles(o, qm, qn)))
    for order, work_of in tiles:
        order = order.tolist()
        assert sorted(order) == list(range(len(order)))
        works, groups = work_of(order)
        if mode == "longest":
            assert works == sorted(works, reverse=True)
        else:
            _assert_grouped_longest_first(works, groups)
            assert len(set(groups)) > 3  # the check above could fail here
    one = batch_plan(_cu([1000], DEVICE), 1000, 64)
    monkeypatch.setenv("FLAMIA_ORDER", "longest")
    lpt = batch_plan(_cu([1000], DEVICE), 1000, 64)
    for a, b in ((one.order_fwd, lpt.order_fwd), (one.order_dkdv, lpt.order_dkdv),
                 (one.order_dq, lpt.order_dq)):
        assert a.tolist() == b.tolist()


def test_compiled_tiles_refuse_other_head_dims(monkeypatch):
    """Off the interpreter, a head dim without compiled tiles is a ValueError that names the
    accepted ones (it was a KeyError from the tile table, found by the GPU tier on 2026-12-06)."""
    monkeypatch.setattr(K, "INTERPRET", False)
    monkeypatch.delenv("FLAMIA_BWD_BLOCKS", raising=False)
    monkeypatch.delenv("FLAMIA_DQ_BLOCKS", raising=False)
    assert K.bwd_blocks(64) == K.BLOCKS[("dkdv", False)][64]
    for blocks in (K.bwd_blocks, K.dq_blocks):
        with pytest.raises(ValueError, match=r"head dim 32: the compiled kernels take \[64, 128\]"):
            blocks(32)


def test_launch_order_is_checked(monkeypatch):
    monkeypatch.setenv("FLAMIA_ORDER", "lpt")
    with pytest.raises(ValueError, match="accepted"):
        K.launch_order()


@pytest.mark.parametrize("lengths", [[1, 7, 129, 63, 100], [300], [31, 33, 1, 64, 65]])
def test_doc_tiles_cover_each_document_once(lengths, monkeypatch):
    """Doc tiles (FLAMIA_TILES=doc): every row of every document lies in exactly one query tile
    (forward, dQ) and one key tile (dK/dV), each tile starts at its document's start plus a
    multiple of the tile size, the empty slots (-1) come last and the tiles are longest first."""
    from flamia.ops import batch_plan

    monkeypatch.setenv("FLAMIA_TILES", "doc")
    total = sum(lengths)
    cu = _cu(lengths, DEVICE)
    plan = batch_plan(cu, total, 64)
    seg_start, seg_end = plan.seg_start.tolist(), plan.seg_end.tolist()
    blocks = {"fwd": K.fwd_blocks(64)[0], "dkdv": K.bwd_blocks(64)[1], "dq": K.dq_blocks(64)[0]}
    for name, order in (("fwd", plan.order_fwd), ("dkdv", plan.order_dkdv), ("dq", plan.order_dq)):
        block, firsts = blocks[name], order.tolist()
        n = sum(-(-length // block) for length in lengths)
        assert firsts[n:] == [-1] * (len(firsts) - n) and min(firsts[:n]) >= 0, name
        covered = []
        for first in firsts[:n]:
            assert (first - seg_start[first]) % block == 0, (name, first)
            covered += range(first, min(first + block, seg_end[first]))
        assert sorted(covered) == list(range(total)), name
    # Grouped longest first (the default order): the forward's work is the number of key tiles
    # up to the tile's last row, its group the document.
    firsts = [f for f in plan.order_fwd.tolist() if f >= 0]
    work = [-(-(min(f + blocks["fwd"], seg_end[f]) - seg_start[f]) // K.fwd_blocks(64)[1])
            for f in firsts]
    _assert_grouped_longest_first(work, [seg_start[f] for f in firsts])


def test_tile_model_counts_fewer_masked_steps_on_doc_tiles():
    """bench/tile_model.py: on short documents doc tiles leave fewer masked steps than grid
    tiles (a grid tile holding two documents masks all of the first one's key tiles); on one
    document per row both tilings are the same."""
    from bench.attention import packed_lengths
    from bench.tile_model import model

    short = model(packed_lengths("u32_1024", 1, 4096), (128, 128), (64, 128), (128, 64))
    for kernel in ("fwd", "dq", "dkdv"):
        (gu, gm), (du, dm) = short["grid"][kernel], short["doc"][kernel]
        assert dm < gm and du + dm < gu + gm, (kernel, short)
    one = model([4096], (128, 128), (64, 128), (128, 64))
    assert one["grid"] == one["doc"]


def test_tile_model_deals_persistent_items():
    """bench.tile_model.persistent_loads: snake dealing (round 1 backwards) against a queue
    (each item to the first free program), on items of 4, 1 | 1, 4 steps for two programs:
    snake gives program 0 both 4s (8 steps), the queue 6, the mean is 5."""
    from bench.tile_model import persistent_loads

    assert persistent_loads([4, 1, 1, 4], 2) == (8, 6, 5.0)
    assert persistent_loads([3] * 8, 4) == (6, 6, 6.0)


def test_tile_model_counts_warpgroup_steps():
    """bench.tile_model.warpgroup_steps: a 64-row warpgroup over its own rows' key tiles. One
    document, 128 x 128 tiles: the same steps (both warpgroups end at the tile's diagonal key
    tile); 128 x 64 tiles: warpgroup 0 skips the last key tile of each of the 64 query tiles;
    a tile whose second warpgroup starts a new document skips that warpgroup's earlier tiles."""
    from bench.tile_model import warpgroup_steps

    one = [0] * 8192
    assert warpgroup_steps(one, 8192, 128, 128) == (2 * sum(range(1, 65)),) * 2
    wide, own = warpgroup_steps(one, 8192, 128, 64)
    assert wide - own == 64 and wide == 2 * sum(range(2, 129, 2))
    # Documents [0, 320) and [320, 512): the tile of rows 256..383 holds both; its warpgroup
    # of rows 320..383 needs key tile 2 (keys 256..383) only, not tiles 0 and 1. The next tile
    # (rows 384..511) starts in the second document: both warpgroups need tiles 2 and 3.
    seg_start = [0] * 320 + [320] * 192
    assert warpgroup_steps(seg_start, 512, 128, 128) == (2 * (1 + 2 + 3 + 2), 2 * 8 - 2)


def test_tile_mode_rejects_bad_values(monkeypatch):
    monkeypatch.setenv("FLAMIA_TILES", "packed")
    with pytest.raises(ValueError, match="FLAMIA_TILES='packed'; accepted"):
        K.doc_tiles()
    monkeypatch.setenv("FLAMIA_TILES", "doc")
    monkeypatch.setenv("FLAMIA_DQ", "fused")
    with pytest.raises(ValueError, match="FLAMIA_DQ=separate only"):
        K.doc_tiles()
    monkeypatch.setenv("FLAMIA_DQ", "separate")
    assert K.doc_tiles() and not K.doc_tiles(is_fp8=True)  # FP8 keeps the grid's groups


def test_short_docs_flag_reaches_the_forward(monkeypatch):
    """flamia.attention decides the short-document forward once per call
    (K.fwd_short_docs, from max_seqlen) and hands the same flag to the batch plan and to the
    forward: forced here (the Gluon kernels do not run on CPU, so the triton forward runs and
    ignores it), the forward receives True, the output and gradients are the bits of the call
    without it, and the custom op takes the flag too (opcheck). On the GPU the flag changes the
    forward's tiles: test_kernels_hopper.test_short_documents_forward covers it there."""
    if DEVICE == "cuda":
        pytest.skip("interpreter tier")
    from flamia import ops

    lengths = [20, 44]
    total, d = sum(lengths), 64
    cu = _cu(lengths, DEVICE)
    q, k, v, do = rand_qkvdo(total, HQ, 2, d, seed=8, device=DEVICE)
    plain = attention_forward_backward(_triton, q, k, v, do, cu)
    seen = []
    forward = K.attention_fwd

    def spy(*args, **kwargs):
        seen.append(kwargs.get("short_docs"))
        return forward(*args, **kwargs)

    monkeypatch.setattr(K, "fwd_short_docs", lambda max_seqlen, d, fp8=False: not fp8)
    monkeypatch.setattr(K, "attention_fwd", spy)
    short = attention_forward_backward(_triton, q, k, v, do, cu)
    assert seen == [True]
    for name, a, b in zip("O dQ dK dV".split(), short, plain):
        assert torch.equal(a, b), name
    plan = ops.cached_batch_plan(cu, total, d, short_docs=True)
    assert plan.short_docs
    args = (q.requires_grad_(), k.requires_grad_(), v.requires_grad_(), plan.seg_start,
            plan.seg_end, plan.order_fwd, plan.order_dkdv, plan.order_dq, d**-0.5, "bf16", True)
    torch.library.opcheck(ops.attention_fwd, args)
    with pytest.raises(ValueError, match="short_docs=True selects the BF16 forward"):
        ops.attention_fwd_fp8(q, k, v, plan.seg_start, plan.seg_end, plan.order_fwd,
                              plan.order_dkdv, plan.order_dq, d**-0.5, "mxfp8", True)


def test_opcheck_and_compile():
    from flamia.ops import attention_fwd, batch_plan

    total, d = 64, 64
    cu = _cu([20, 44], DEVICE)
    q, k, v, do = rand_qkvdo(total, HQ, 2, d, seed=6, device=DEVICE)
    plan = batch_plan(cu, total, d)
    args = (q.requires_grad_(), k.requires_grad_(), v.requires_grad_(), plan.seg_start,
            plan.seg_end, plan.order_fwd, plan.order_dkdv, plan.order_dq, d**-0.5, "bf16")
    torch.library.opcheck(attention_fwd, args)

    def f(q, k, v, cu):
        return flamia.attention(q, k, v, cu, total, recipe="bf16", impl="triton").float().sum()

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager" if DEVICE == "cpu" else "inductor")
    eager_grads = torch.autograd.grad(f(q, k, v, cu), (q, k, v))
    compiled_grads = torch.autograd.grad(compiled(q, k, v, cu), (q, k, v))
    for a, b in zip(eager_grads, compiled_grads):
        assert torch.equal(a, b)


def test_autotune_config_strings():
    """FLAMIA_AUTOTUNE items: warps x stages, optionally a register cap; anything else is refused."""
    c = K._parse_config("4x3r168")
    assert (c.num_warps, c.num_stages, c.maxnreg) == (4, 3, 168)
    c = K._parse_config("8x2")
    assert (c.num_warps, c.num_stages, c.maxnreg) == (8, 2, None)
    with pytest.raises(ValueError, match="accepted"):
        K._parse_config("8y2")


# ------------------------------------------------------------------------------------------
# dQ accumulated by the dK/dV kernel in a fixed order (FLAMIA_DQ=fused)
# ------------------------------------------------------------------------------------------

DQ_CASES = CPU_CASES if DEVICE == "cpu" else [([1, 7, 129, 1000, 4001, 63], 16, 4, 128),
                                               ([300] * 20 + [37, 8192], 8, 8, 64)]


def _grads(lengths, hq, hkv, d, mode, monkeypatch, seed=0):
    monkeypatch.setenv("FLAMIA_DQ", mode)
    # The fused mode runs the triton dK/dV kernel; so does the separate one here (on Hopper it
    # would run the Gluon one), so that dK and dV can be compared bit for bit.
    monkeypatch.setenv("FLAMIA_DKDV_KERNEL", "triton")
    q, k, v, do = rand_qkvdo(sum(lengths), hq, hkv, d, seed=seed, device=DEVICE)
    return attention_forward_backward(_triton, q, k, v, do, _cu(lengths, DEVICE))


@pytest.mark.parametrize("lengths,hq,hkv,d", DQ_CASES)
def test_fused_dq_matches_dq_kernel(lengths, hq, hkv, d, poisoned, monkeypatch):
    """Both modes add the same per-tile products. Interpreter (fp32 math, one tile shape): the
    same bits. GPU: the dQ kernel sums a query tile's 64-key products inside the MMA, the fused
    mode sums 128-key products in memory, so they differ by accumulation order only; and the
    fused mode gives the same bits on every run (the order is fixed)."""
    separate = _grads(lengths, hq, hkv, d, "separate", monkeypatch)
    fused = _grads(lengths, hq, hkv, d, "fused", monkeypatch)
    again = _grads(lengths, hq, hkv, d, "fused", monkeypatch)
    for name, a, b, c in zip("O dQ dK dV".split(), separate, fused, again):
        assert torch.isfinite(b).all(), f"{name}: non-finite (unwritten?) elements"
        assert torch.equal(b, c), f"{name}: two runs of the fused mode differ"
        if DEVICE == "cpu" or name != "dQ":
            assert torch.equal(a, b), f"{name} differs between the dQ modes"
        else:
            rel = (a.float() - b.float()).norm() / a.float().norm()
            assert rel < 4e-3, f"dQ: relative difference {rel:.2e} between the dQ modes"


@pytest.mark.interpret
def test_fused_dq_out_of_order_is_caught(monkeypatch):
    """The check behind the ordered adds can fail: a launch order that puts later key tiles
    first makes the interpreter's dQ NaN (on the GPU such an order could hang, so it is not
    run there)."""
    if DEVICE == "cuda":
        pytest.skip("interpreter tier")
    from flamia import ops

    monkeypatch.setenv("FLAMIA_DQ", "fused")
    lengths = [1, 7, 129, 63, 100]
    q, k, v, do = rand_qkvdo(sum(lengths), 4, 2, 64, seed=1)
    plan = ops.batch_plan(_cu(lengths, "cpu"), sum(lengths), 64)
    o, lse = ops.attention_fwd(q, k, v, plan.seg_start, plan.seg_end, plan.order_fwd,
                               plan.order_dkdv, plan.order_dq, 0.125, "bf16")
    bwd = lambda order: K.attention_bwd(do, q, k, v, o, lse, plan.seg_start, plan.seg_end,
                                        order, plan.order_dq, 0.125)
    assert torch.isfinite(bwd(plan.order_dkdv)[0]).all()
    assert torch.isnan(bwd(plan.order_dkdv.flip(0).contiguous())[0]).any()


def _shared_query_tile(lo, hi, a, b):
    return max(lo[a], lo[b]) < min(hi[a], hi[b])


@pytest.mark.parametrize("seed", range(4))
def test_fused_dq_launch_order_keeps_shared_tiles_in_order(seed):
    """Dependency-safe longest first: whenever two key tiles see a common query tile, the
    earlier one launches first; tiles of separate chains go longest chain first."""
    from flamia.ops import _key_tile_ranges, _ordered_longest_first

    gen = torch.Generator().manual_seed(seed)
    lengths = []
    for _ in range(5):  # groups of documents ending on the 128-token key-tile grid: chain breaks
        group = torch.randint(1, 700, (3,), generator=gen).tolist()
        lengths += group + [128 - sum(group) % 128]
    lengths += [2000, 1, 64]
    total = sum(lengths)
    seg = torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(lengths))
    ends = torch.cumsum(torch.tensor(lengths), 0)
    lo, hi = _key_tile_ranges(ends[seg], total, 64, 128)
    order = _ordered_longest_first(lo, hi).tolist()
    assert sorted(order) == list(range(lo.numel()))
    assert (hi[:-1] <= lo[1:]).sum() >= 5  # several chains
    place = {tile: i for i, tile in enumerate(order)}
    lo, hi = lo.tolist(), hi.tolist()
    for a in range(len(lo)):
        for b in range(a + 1, len(lo)):
            if _shared_query_tile(lo, hi, a, b):
                assert place[a] < place[b], (a, b)
    # The first launch is the first tile of the chain (run of tiles linked by shared query
    # tiles) that holds the longest tile.
    work = [h - l for l, h in zip(lo, hi)]
    first, longest = order[0], work.index(max(work))
    assert first <= longest
    assert all(_shared_query_tile(lo, hi, n, n + 1) for n in range(first, longest))
    assert first == 0 or not _shared_query_tile(lo, hi, first - 1, first)


def test_dq_mode_rejects_unknown_values(monkeypatch):
    monkeypatch.setenv("FLAMIA_DQ", "atomic")
    with pytest.raises(ValueError, match="accepted"):
        K.dq_fused(False)
    monkeypatch.setenv("FLAMIA_DQ", "fused")
    assert K.dq_fused(False) and not K.dq_fused(True)  # FP8 recipes keep their dQ kernel


@pytest.mark.parametrize("dq_mode", K.DQ_MODES)
def test_autotuner_zeroed_buffers_are_not_shared(dq_mode, monkeypatch):
    """The dK/dV autotuner zeroes dqa and sem before every timed run (reset_to_zero): they must
    own their memory in both modes. (On 2026-12-03 the unused ones were aliased to delta, and
    the first autotuned launch on the H200 zeroed delta: dQ and dK 50% wrong.)"""
    monkeypatch.setenv("FLAMIA_DQ", dq_mode)
    monkeypatch.setenv("FLAMIA_DKDV_KERNEL", "triton")  # the autotuned one (not Gluon's)
    names = K._attn_bwd_dkdv_kernel.fn.arg_names
    launches = []

    class Recorder:
        def __getitem__(self, grid):
            return lambda *args, **kwargs: launches.append(args)

    monkeypatch.setattr(K, "_attn_bwd_dkdv_kernel", Recorder())
    monkeypatch.setattr(K, "_attn_bwd_dq_kernel", Recorder())
    from flamia import ops

    lengths = [5, 60]
    q, k, v, do = rand_qkvdo(65, 2, 1, 64, seed=2)
    plan = ops.batch_plan(_cu(lengths, DEVICE), 65, 64)
    o, lse = ops.attention_fwd(q, k, v, plan.seg_start, plan.seg_end, plan.order_fwd,
                               plan.order_dkdv, plan.order_dq, 0.125, "bf16")
    K.attention_bwd(do, q, k, v, o, lse, plan.seg_start, plan.seg_end, plan.order_dkdv,
                    plan.order_dq, 0.125)
    args = launches[0]
    zeroed = {names.index(n) for n in K._attn_bwd_dkdv_kernel_reset}
    others = [a for i, a in enumerate(args) if i not in zeroed and isinstance(a, torch.Tensor)]
    for i in zeroed:
        assert all(args[i].data_ptr() != t.data_ptr() for t in others), names[i]
