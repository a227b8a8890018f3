"""The Gluon BF16 forward, dQ and dK/dV kernels for Hopper (flamia/kernels/attention_hopper.py;
FLAMIA_FWD_KERNEL / FLAMIA_DQ_KERNEL / FLAMIA_DKDV_KERNEL = auto runs them on compute capability
9.x, = gluon asks for them). Gluon has no interpreter, so this is GPU tier only; on CPU the tests
are those of the selection switches, the tile-config parser and the BF16 backward's launch order
with the kernels recorded (CI also compiles the three kernels for sm_90,
tests/test_compile.py)."""

import pytest
import torch

import flamia
from flamia.kernels import attention as K
from flamia.probes import adversarial_cu_seqlens, probe_attention
from flamia.reference import attention_forward_backward

from conftest import DEVICE, rand_qkvdo
from test_kernels import GPU_CASES, _check_flash_attention_rule, _cu, _triton, poisoned  # noqa: F401

HOPPER = DEVICE == "cuda" and torch.cuda.get_device_capability()[0] == 9
hopper = pytest.mark.skipif(not HOPPER, reason="Gluon kernels: need a Hopper GPU (sm_90)")
GLUON_ENVS = ("FLAMIA_FWD_KERNEL", "FLAMIA_DQ_KERNEL", "FLAMIA_DKDV_KERNEL")
# Many short documents (1 to 700 tokens, 14,484 in all): a persistent program takes several
# work items, most of them with few query tiles.
U_SHORT_DOCS = [1 + (37 * i) % 700 for i in range(48)]


@pytest.fixture
def gluon_kernels(monkeypatch):
    """The Gluon kernels asked for explicitly (an unsupported input raises instead of falling
    back to triton)."""
    for env in GLUON_ENVS:
        monkeypatch.setenv(env, "gluon")


def _backward_case(lengths, hq, hkv, d, seed):
    """A backward-kernel comparison on the GPU: random inputs, the forward's O and lse2, and a
    function running the backward on them under the environment of the moment (the plan is
    looked up at each call: FLAMIA_DQ changes the dK/dV launch order)."""
    cu = _cu(lengths, "cuda")
    q, k, v, do = rand_qkvdo(sum(lengths), hq, hkv, d, seed=seed, device="cuda")
    plan = flamia.ops.batch_plan(cu, q.shape[0], d)
    o, lse = K.attention_fwd(q, k, v, plan.seg_start, plan.order_fwd, d ** -0.5,
                             seg_end=plan.seg_end)

    def backward():
        plan = flamia.ops.batch_plan(cu, q.shape[0], d)
        return K.attention_bwd(do, q, k, v, o, lse, plan.seg_start, plan.seg_end,
                               plan.order_dkdv, plan.order_dq, d ** -0.5)
    return backward


def test_fwd_kernel_switch(monkeypatch):
    monkeypatch.setenv("FLAMIA_FWD_KERNEL", "cuda")
    with pytest.raises(ValueError, match="accepted"):
        K.fwd_kernel()
    monkeypatch.setenv("FLAMIA_FWD_KERNEL", "gluon")
    if DEVICE == "cpu":
        for fp8 in (False, True):  # the forward has a Gluon FP8 kernel too
            with pytest.raises(ValueError, match="TRITON_INTERPRET"):
                K.fwd_kernel(fp8=fp8)
    monkeypatch.setenv("FLAMIA_FWD_KERNEL", "auto")
    assert K.fwd_kernel() == ("gluon" if HOPPER else "triton")
    assert K.fwd_kernel(fp8=True) == "triton"  # the Gluon FP8 forward only when asked for
    monkeypatch.delenv("FLAMIA_FWD_KERNEL")
    assert K.fwd_kernel() == ("gluon" if HOPPER else "triton")  # auto is the default
    monkeypatch.delenv("FLAMIA_DQ_KERNEL", raising=False)
    assert K.dq_kernel() == ("gluon" if HOPPER else "triton")
    assert K.dq_kernel(fp8=True) == "triton"
    monkeypatch.setenv("FLAMIA_DQ_KERNEL", "wgmma")
    with pytest.raises(ValueError, match="accepted"):
        K.dq_kernel()
    monkeypatch.delenv("FLAMIA_DKDV_KERNEL", raising=False)
    monkeypatch.delenv("FLAMIA_FP8_DKDV", raising=False)
    assert K.dkdv_kernel() == ("gluon" if HOPPER else "triton")
    # the Gluon FP8 dK/dV kernel is the default on Hopper too (since 2026-12-06, fifteenth session)
    assert K.dkdv_kernel(fp8=True) == ("gluon" if HOPPER else "triton")
    monkeypatch.setenv("FLAMIA_FP8_DKDV", "fused")  # names a triton FP8 kernel: auto takes it
    assert K.dkdv_kernel(fp8=True) == "triton"
    monkeypatch.setenv("FLAMIA_DKDV_KERNEL", "gluon")
    if DEVICE == "cpu":
        for fp8 in (False, True):  # dK/dV has a Gluon FP8 kernel too
            with pytest.raises(ValueError, match="TRITON_INTERPRET"):
                K.dkdv_kernel(fp8=fp8)
    else:
        with pytest.raises(ValueError, match="set only one of them"):  # gluon and a triton form
            K.dkdv_kernel(fp8=True)
        monkeypatch.delenv("FLAMIA_FP8_DKDV")
        assert K.dkdv_kernel(fp8=True) == "gluon"
    monkeypatch.setenv("FLAMIA_DKDV_KERNEL", "Gluon")
    with pytest.raises(ValueError, match="FLAMIA_DKDV_KERNEL='Gluon'; accepted"):
        K.dkdv_kernel()


def test_cuda_major_is_the_capability_major(monkeypatch):
    """kernels.cuda_major (cached capability lookups of the launchers): the major version, of
    the current device or of a tensor's, 0 for CPU tensors and without CUDA."""
    from flamia import kernels

    kernels._capability.cache_clear()
    kernels._cuda_available.cache_clear()
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index=None: (9, 0))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    try:
        assert kernels.cuda_major() == 9
        assert kernels.cuda_major(torch.device("cuda", 0)) == 9
        assert kernels.cuda_major(torch.device("cpu")) == 0
        monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
        kernels._cuda_available.cache_clear()
        assert kernels.cuda_major() == 0
    finally:
        kernels._capability.cache_clear()
        kernels._cuda_available.cache_clear()


def test_gluon_kernel_refusal(monkeypatch):
    """After a kernel chose "gluon": inputs it cannot take go to the triton kernel with auto
    (the default) and are an error, with the reason, when gluon was asked for."""
    for env in GLUON_ENVS:
        monkeypatch.delenv(env, raising=False)
        assert K._gluon_takes(env, None)
        assert not K._gluon_takes(env, "q needs heads adjacent")
        monkeypatch.setenv(env, "gluon")
        assert K._gluon_takes(env, None)
        with pytest.raises(ValueError, match=f"{env}=gluon: q needs heads adjacent"):
            K._gluon_takes(env, "q needs heads adjacent")


def test_gluon_forward_config_is_checked(monkeypatch):
    """FLAMIA_GLUON_FWD (tile sweeps) is parsed and checked before anything is compiled."""
    from flamia.kernels import attention_hopper as H
    assert H.config() == H.DEFAULT_CONFIG and H.fwd_mode() == H.DEFAULT_MODE == "persistent"
    assert H.fwd_mode(doc_tiles=True) == H.DOC_TILES_MODE == "ws"  # persistent: grid tiles only
    monkeypatch.setenv("FLAMIA_GLUON_FWD", "64,64,4,2")
    assert H.config() == (64, 64, 4, 2) and H.fwd_mode() == ""  # four fields: the plain kernel
    monkeypatch.setenv("FLAMIA_GLUON_FWD", "128,128,8,3,ws")
    assert H.config() == (128, 128, 8, 3) and H.fwd_mode() == "ws"
    monkeypatch.setenv("FLAMIA_GLUON_FWD", "128,128,8,2,pingpong")
    assert H.config() == (128, 128, 8, 2) and H.fwd_mode() == "pingpong"
    monkeypatch.setenv("FLAMIA_GLUON_FWD", "128,128,8,2,persistent")
    assert H.config() == (128, 128, 8, 2) and H.fwd_mode() == "persistent"
    monkeypatch.setenv("FLAMIA_GLUON_FWD", "128,128,8,3,persistent")  # D = 64 only: at the launch
    assert H.config() == (128, 128, 8, 3) and H.fwd_mode() == "persistent"
    for bad in ("128,128,4,2", "128,32,8,2", "128,128,8,1", "128x128", "64,64,4,2,ws",
                "128,128,8,2,wss", "64,64,4,2,persistent",
                "128,128,8,2,ws_rows"):
        monkeypatch.setenv("FLAMIA_GLUON_FWD", bad)
        with pytest.raises(ValueError, match="FLAMIA_GLUON_FWD"):
            H.config()


SHORT_LENGTHS = [1, 31, 33, 63, 65, 127, 129, 255, 257, 511, 513, 1000, 1024]  # off the grid


def test_short_documents_pick_the_forward_tiles(monkeypatch):
    """kernels.attention.fwd_short_docs: the BF16 Gluon forward at D = 64 or 128 on grid tiles
    takes the short-document tiles (64-wide key tiles, persistent) when max_seqlen is at most
    SHORT_DOCS_MAX_SEQLEN, and not for longer documents, other head dims, the FP8 recipes, doc
    tiles or an explicit FLAMIA_GLUON_FWD (which wins). The batch plan follows the flag: its
    forward order is the one of the explicit setting's tiles, and the flag is part of the plan
    cache's key. CPU, the kernel choice stubbed to "gluon" (no launch)."""
    from flamia import ops
    from flamia.kernels import attention_hopper as H
    monkeypatch.setattr(K, "fwd_kernel", lambda fp8=False: "triton" if fp8 else "gluon")
    monkeypatch.delenv("FLAMIA_GLUON_FWD", raising=False)
    monkeypatch.setenv("FLAMIA_TILES", "grid")
    limit = H.SHORT_DOCS_MAX_SEQLEN
    assert K.fwd_short_docs(limit, 128) and K.fwd_short_docs(1, 128)
    assert not K.fwd_short_docs(limit + 1, 128)
    assert K.fwd_short_docs(limit, 64) and not K.fwd_short_docs(limit + 1, 64)
    assert not K.fwd_short_docs(limit, 32)
    assert not K.fwd_short_docs(limit, 128, fp8=True)
    assert H.config(True) == H.SHORT_DOCS_CONFIG and H.fwd_mode(True) == H.SHORT_DOCS_MODE
    assert H.config(False) == H.DEFAULT_CONFIG and H.fwd_mode(False) == H.DEFAULT_MODE
    assert K.fwd_blocks(128, short_docs=True) == H.SHORT_DOCS_CONFIG[:2] != H.DEFAULT_CONFIG[:2]

    total = sum(SHORT_LENGTHS)
    cu = _cu(SHORT_LENGTHS, "cpu")
    short = ops.cached_batch_plan(cu, total, 128, short_docs=True)
    assert short is ops.cached_batch_plan(cu, total, 128, short_docs=True)
    default = ops.cached_batch_plan(cu, total, 128)  # the flag is part of the cache key
    assert short.short_docs and not default.short_docs
    setting = ",".join(map(str, H.SHORT_DOCS_CONFIG)) + "," + H.SHORT_DOCS_MODE
    monkeypatch.setenv("FLAMIA_GLUON_FWD", setting)
    explicit = ops.batch_plan(cu, total, 128)
    assert torch.equal(short.order_fwd, explicit.order_fwd)
    # 64-wide key tiles group the query tiles of these documents otherwise than 128-wide ones
    assert not torch.equal(short.order_fwd, default.order_fwd)
    monkeypatch.setenv("FLAMIA_GLUON_FWD", "128,128,8,2,ws")
    assert not K.fwd_short_docs(limit, 128)  # an explicit setting wins
    assert H.config(True) == (128, 128, 8, 2) and H.fwd_mode(True) == "ws"
    monkeypatch.delenv("FLAMIA_GLUON_FWD")
    monkeypatch.setenv("FLAMIA_TILES", "doc")
    assert not K.fwd_short_docs(limit, 128)  # the persistent forward runs grid tiles only


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("d", [64, 128])
def test_short_documents_forward(d, poisoned, monkeypatch):
    """flamia.attention with max_seqlen at most SHORT_DOCS_MAX_SEQLEN runs the short-document
    forward: O and the gradients are the bits of the same call with that setting asked for in
    FLAMIA_GLUON_FWD, they satisfy the FlashAttention rule against float64 (every element
    written: poisoned outputs), and the probes report exactly 0 through the automatic path."""
    from test_reference import naive_attention

    from flamia.kernels import attention_hopper as H
    from flamia.reference import exact_attention

    monkeypatch.delenv("FLAMIA_GLUON_FWD", raising=False)
    longest, total = max(SHORT_LENGTHS), sum(SHORT_LENGTHS)
    assert K.fwd_short_docs(longest, d)
    short = lambda q, k, v, cu: flamia.attention(q, k, v, cu, longest, recipe="bf16",
                                                 impl="triton")
    cu = _cu(SHORT_LENGTHS, "cuda")
    q, k, v, do = rand_qkvdo(total, 8, 2, d, seed=5, device="cuda")
    auto = attention_forward_backward(short, q, k, v, do, cu)
    ref = attention_forward_backward(exact_attention, q, k, v, do.double(), cu)
    torch_bf16 = attention_forward_backward(naive_attention, q, k, v, do, cu)
    for name, a, b, r in zip("O dQ dK dV".split(), auto, torch_bf16, ref):
        assert torch.isfinite(a).all(), f"{name}: non-finite (unwritten?) elements"
        err = (a.double() - r).abs().max().item()
        base = (b.double() - r).abs().max().item()
        assert err <= 2 * base + 1e-5, f"{name}: max err {err} > 2 * {base} + 1e-5"
    res = probe_attention(short, q, k, v, cu, do, max_targets=3)
    for r in res.values():
        assert r.n_compared > 0
        assert r.max_abs_delta == 0.0, str(r)
    monkeypatch.setenv("FLAMIA_GLUON_FWD",
                       ",".join(map(str, H.SHORT_DOCS_CONFIG)) + "," + H.SHORT_DOCS_MODE)
    explicit = attention_forward_backward(short, q, k, v, do, cu)
    for name, a, b in zip("O dQ dK dV".split(), auto, explicit):
        assert torch.equal(a, b), name


def test_persistent_kernels_take_grid_tiles_only(monkeypatch):
    """The persistent forward, dQ and dK/dV kernels refuse doc tiles
    (FLAMIA_TILES=doc) with the reason and the way out, before anything is compiled or launched
    (CPU tensors; the capability check stubbed)."""
    from flamia.kernels import attention_hopper as H
    monkeypatch.setattr(H, "cuda_major", lambda device=None: 9)
    t, hq, d = 256, 2, 64
    x = torch.zeros(t, hq, d, dtype=torch.bfloat16)
    seg = torch.zeros(t, dtype=torch.int32)
    order = torch.zeros(3, dtype=torch.int32)
    lse = torch.zeros(hq, t)
    fwd = lambda: H.attention_fwd_hopper(x, x, x, seg, order, 0.1, torch.empty_like(x), lse,
                                         seg, True)
    dq = lambda: H.attention_dq_hopper(x, x, x, x, lse, lse, seg, order, 0.1,
                                       torch.empty_like(x), seg, True)
    dkdv = lambda: H.attention_dkdv_hopper(x, x, x, x, lse, lse, seg, seg, order, 0.1,
                                           torch.empty_like(x), torch.empty_like(x),
                                           doc_tiles=True)
    for name, value, launch, why in (
            ("FLAMIA_GLUON_FWD", "128,128,8,2,persistent", fwd, "persistent forward .* grid"),
            ("FLAMIA_GLUON_DQ", "persistent", dq, "persistent dQ kernel .* grid"),
            ("FLAMIA_GLUON_DKDV", "2,0,persistent", dkdv, "persistent dK/dV kernel .* grid")):
        monkeypatch.setenv(name, value)
        with pytest.raises(ValueError, match=why + " tiles only"):
            launch()


def test_persistent_forward_ring_fits_shared_memory(monkeypatch):
    """More ring slots than the persistent forward fits in shared memory at the call's head
    dim (attention_hopper.PERSISTENT_MAX_STAGES) are refused with the reason before anything is
    compiled or launched (CPU tensors; the capability check stubbed)."""
    from flamia.kernels import attention_hopper as H
    monkeypatch.setattr(H, "cuda_major", lambda device=None: 9)
    t, hq, d = 256, 2, 128
    x = torch.zeros(t, hq, d, dtype=torch.bfloat16)
    seg = torch.zeros(t, dtype=torch.int32)
    lse = torch.zeros(hq, t)
    monkeypatch.setenv("FLAMIA_GLUON_FWD", f"128,128,8,{H.PERSISTENT_MAX_STAGES[d] + 1},persistent")
    with pytest.raises(ValueError, match="at D = 128 takes at most 2 ring slots"):
        H.attention_fwd_hopper(x, x, x, seg, torch.zeros(3, dtype=torch.int32), 0.1,
                               torch.empty_like(x), lse, seg)


def test_gluon_dq_mode_is_checked(monkeypatch):
    from flamia.kernels import attention_hopper as H
    monkeypatch.delenv("FLAMIA_GLUON_DQ", raising=False)
    assert H.dq_mode() == "persistent" and H.dq_mode(doc_tiles=True) == "ws"
    monkeypatch.setenv("FLAMIA_GLUON_DQ", "ws")
    assert H.dq_mode() == "ws"
    monkeypatch.setenv("FLAMIA_GLUON_DQ", "plain")
    assert H.dq_mode() == "plain"
    monkeypatch.setenv("FLAMIA_GLUON_DQ", "persistent")
    assert H.dq_mode() == "persistent"
    for bad in ("WS", "ws_rows"):
        monkeypatch.setenv("FLAMIA_GLUON_DQ", bad)
        with pytest.raises(ValueError, match=f"FLAMIA_GLUON_DQ='{bad}'; accepted"):
            H.dq_mode()


def _check_setting(monkeypatch, env, parse, good, bad, match):
    """``parse`` reads ``env``: each of ``good`` (text -> value) and a clear error, matching
    ``match``, for each of ``bad``."""
    for text, want in good:
        monkeypatch.setenv(env, text)
        assert parse() == want, text
    for text in bad:
        monkeypatch.setenv(env, text)
        with pytest.raises(ValueError, match=match):
            parse()


def test_gluon_dkdv_pipeline_is_checked(monkeypatch):
    """FLAMIA_GLUON_DKDV (pipeline sweeps of the dK/dV kernel) is parsed and checked before
    anything is compiled."""
    from flamia.kernels import attention_hopper as H
    monkeypatch.delenv("FLAMIA_GLUON_DKDV", raising=False)
    # Default: warp-specialized, except where dQ is fused (only the plain kernel adds dQ).
    assert H.dkdv_pipeline() == (H.DKDV_CONFIG[3], H.DKDV_DEFER, False, True)
    assert H.dkdv_pipeline(fuse_dq=True) == (H.DKDV_CONFIG[3], H.DKDV_DEFER, False, False)
    _check_setting(monkeypatch, "FLAMIA_GLUON_DKDV", H.dkdv_pipeline,
                   (("3,1", (3, True, False, False)), ("2,0,1", (2, False, True, False)),
                    ("2,0,ws", (2, False, False, True)), ("3,0,0,ws", (3, False, False, True)),
                    ("2,0,persistent", (2, False, False, True))),
                   ("2,1", "3,1,ws", "2,0,1,ws", "2,0,wss", "ws", "2", "3,1,persistent",
                    "persistent"), "FLAMIA_GLUON_DKDV")
    monkeypatch.setenv("FLAMIA_GLUON_DKDV", "3,0,persistent")
    assert H.dkdv_persistent()
    monkeypatch.setenv("FLAMIA_GLUON_DKDV", "3,0,ws")
    assert not H.dkdv_persistent()
    monkeypatch.delenv("FLAMIA_GLUON_DKDV")  # the default: persistent on grid tiles
    assert H.dkdv_persistent() and not H.dkdv_persistent(doc_tiles=True)


def test_gluon_dkdv_lse_mode_is_checked(monkeypatch):
    from flamia.kernels import attention_hopper as H
    monkeypatch.delenv("FLAMIA_GLUON_DKDV_LSE", raising=False)
    assert H.dkdv_lse_mode() == "tma"
    _check_setting(monkeypatch, "FLAMIA_GLUON_DKDV_LSE", H.dkdv_lse_mode, (("load", "load"), ),
                   ("TMA", "smem"), "FLAMIA_GLUON_DKDV_LSE='.*'; accepted")


def test_gluon_dkdv8_setting_is_checked(monkeypatch):
    """FLAMIA_GLUON_DKDV8 (ring slots and schedule of the Gluon FP8 dK/dV kernel) is checked
    before anything is compiled."""
    from flamia.kernels import attention_hopper as H
    monkeypatch.delenv("FLAMIA_GLUON_DKDV8", raising=False)
    assert H.dkdv8_setting() == (H.DKDV8_CONFIG[2], H.DKDV8_SCHEDULE, 2) == (3, "pipe", 2)
    assert H.dkdv8_setting(torch.bfloat16) == (*H.DKDV8_BF16_QK, 2) == (2, "wait", 2)  # nvfp4
    _check_setting(monkeypatch, "FLAMIA_GLUON_DKDV8", H.dkdv8_setting,
                   (("3", (3, "wait", 2)), ("2,pipe", (2, "pipe", 2)), ("3,pipe", (3, "pipe", 2)),
                    ("3,pair", (3, "pair", 2)), ("2,pair", (2, "pair", 2)),
                    ("3,pipe,pt3", (3, "pipe", 3)), ("2,pt3", (2, "wait", 3)),
                    ("3,pipe,pt2", (3, "pipe", 2)), ("3,pipe,persistent", (3, "pipe", 2)),
                    ("2,pt3,persistent", (2, "wait", 3))),
                   ("1", "4", "2,0", "ws", "3,pipe,pipe", "pipe", "pair", "3,pipe,pair",
                    "3,wait", "pt3", "3,pipe,pt4", "3,pt3,pipe", "3,pipe,pt3,pt3",
                    "persistent,3", "3,persistent,pipe", "3,pipe,persistent,persistent"),
                   "FLAMIA_GLUON_DKDV8=.*accepted: ring slots 2 or 3")
    # ",persistent" (or "persistent" alone: the default schedule) picks the persistent kernel
    monkeypatch.setenv("FLAMIA_GLUON_DKDV8", "persistent")
    assert H.dkdv8_setting() == (3, "pipe", 2) and H.dkdv8_persistent()
    monkeypatch.setenv("FLAMIA_GLUON_DKDV8", "3,pipe")
    assert not H.dkdv8_persistent()
    monkeypatch.delenv("FLAMIA_GLUON_DKDV8")
    assert H.dkdv8_persistent() == H.DKDV8_PERSISTENT


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("lengths,hq,hkv,d", GPU_CASES)
def test_gluon_forward_flash_attention_rule(lengths, hq, hkv, d, gluon_kernels, poisoned):
    """O and the gradients (Gluon forward, dQ and dK/dV kernels) by the FlashAttention rule
    against float64; every output element written (poisoned)."""
    _check_flash_attention_rule(lengths, hq, hkv, d, "cuda")


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("lengths,hq,hkv,d", GPU_CASES)
def test_gluon_forward_matches_triton_forward(lengths, hq, hkv, d, monkeypatch):
    """Same recipe, other tile widths (128 keys against 64): P's bf16 rounding happens against
    a different running maximum, so O agrees to about one bf16 step; lse2 = m + log2(l) only
    differs by the fp32 order of l's sum."""
    cu = _cu(lengths, "cuda")
    q, k, v, _ = rand_qkvdo(sum(lengths), hq, hkv, d, seed=5, device="cuda")
    outs = {}
    for kernel in ("triton", "gluon"):
        monkeypatch.setenv("FLAMIA_FWD_KERNEL", kernel)
        plan = flamia.ops.batch_plan(cu, q.shape[0], d)
        outs[kernel] = K.attention_fwd(q, k, v, plan.seg_start, plan.order_fwd, d ** -0.5)
    (o_t, lse_t), (o_g, lse_g) = outs["triton"], outs["gluon"]
    rel = (o_g.float() - o_t.float()).norm() / o_t.float().norm()
    assert rel < 4e-3, f"O: relative difference {rel:.2e}"
    assert (lse_g - lse_t).abs().max().item() < 1e-4


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("block_n,mode,stages", [(128, "ws", 2), (128, "ws", 3),
                                                 (128, "pingpong", 2), (128, "persistent", 2),
                                                 (64, "persistent", 2), (128, "persistent", 4)])
@pytest.mark.parametrize("lengths,hq,hkv,d", GPU_CASES + [([8192] * 4, 16, 16, 128)])
def test_warp_specialized_forward_is_the_plain_forward(lengths, hq, hkv, d, block_n, mode, stages,
                                                       poisoned, monkeypatch):
    """FLAMIA_GLUON_FWD=128,N,8,S,ws|pingpong|persistent: the same MMAs and softmax steps for
    every row as the plain Gluon forward on the same tiles (N = 64: the short-document setting,
    attention_hopper.SHORT_DOCS_CONFIG) (only who issues the loads, when slots are released, in
    which order the warpgroups issue their MMAs and, persistent, which program runs which tiles
    through one ring differ), so O and lse2 are the same bits; every element written (poisoned
    outputs). The persistent programs run several tiles each (every case has more work items,
    Hq x tiles, than an H100 or H200 has SMs), the ring's tile count carried from tile to
    tile. More than 2 persistent ring slots: D = 64 only (PERSISTENT_MAX_STAGES)."""
    from flamia.kernels import attention_hopper as H
    if mode == "persistent" and stages > H.PERSISTENT_MAX_STAGES[d]:
        pytest.skip(f"the persistent forward takes at most {H.PERSISTENT_MAX_STAGES[d]} ring "
                    f"slots at D = {d}")
    cu = _cu(lengths, "cuda")
    q, k, v, _ = rand_qkvdo(sum(lengths), hq, hkv, d, seed=7, device="cuda")
    monkeypatch.setenv("FLAMIA_FWD_KERNEL", "gluon")
    outs = {}
    for setting in (f"128,{block_n},8,2", f"128,{block_n},8,{stages},{mode}"):
        monkeypatch.setenv("FLAMIA_GLUON_FWD", setting)
        plan = flamia.ops.batch_plan(cu, q.shape[0], d)
        outs[setting] = K.attention_fwd(q, k, v, plan.seg_start, plan.order_fwd, d ** -0.5)
    (o_p, lse_p), (o_w, lse_w) = outs.values()
    assert torch.isfinite(o_w).all() and torch.isfinite(lse_w).all()
    assert torch.equal(o_w, o_p) and torch.equal(lse_w, lse_p)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("stages", [2, 3])
@pytest.mark.parametrize("lengths,hq,hkv,d", [([1, 7, 129, 1000, 4001, 62], 16, 4, 128),
                                              ([1, 7, 129, 1000, 4001, 62], 8, 2, 64),
                                              ([300] * 20 + [37, 8191], 16, 4, 128),
                                              ([8192] * 4, 16, 16, 128)])
def test_dkdv_lse_by_tma_is_the_same(lengths, hq, hkv, d, stages, poisoned, monkeypatch):
    """FLAMIA_GLUON_DKDV_LSE=tma (lse2 and delta by the producer's TMA, read from shared memory)
    gives the warp-specialized dK/dV kernel the same values as its global loads: the same bits
    (T a multiple of 4 here, the cases of GPU_CASES with one token less or more; other T load
    them); every element written (poisoned outputs)."""
    assert sum(lengths) % 4 == 0
    backward = _backward_case(lengths, hq, hkv, d, seed=8)
    monkeypatch.setenv("FLAMIA_DKDV_KERNEL", "gluon")
    monkeypatch.setenv("FLAMIA_GLUON_DKDV", f"{stages},0,ws")
    grads = {}
    for mode in ("load", "tma"):
        monkeypatch.setenv("FLAMIA_GLUON_DKDV_LSE", mode)
        grads[mode] = backward()
    for a, b in zip(grads["tma"], grads["load"]):
        assert torch.isfinite(a).all()
        assert torch.equal(a, b)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("mode", ["ws", "persistent"])
@pytest.mark.parametrize("stages", [2, 3])
@pytest.mark.parametrize("lengths,hq,hkv,d", GPU_CASES + [([8192] * 4, 16, 16, 128)])
def test_warp_specialized_dkdv_is_the_plain_dkdv(lengths, hq, hkv, d, stages, mode, poisoned,
                                                 monkeypatch):
    """FLAMIA_GLUON_DKDV=S,0,ws (and its persistent version, S,0,persistent, whose programs
    run several key tiles each here: more work items than SMs in every case): each key row sees
    the same MMAs and steps as in the plain Gluon dK/dV kernel (only who loads the ring and how
    slots are released differ), so dK and dV are the same bits; every element written
    (poisoned outputs). It does not fuse dQ: asked to, it says so."""
    backward = _backward_case(lengths, hq, hkv, d, seed=8)
    monkeypatch.setenv("FLAMIA_DKDV_KERNEL", "gluon")
    grads = {}
    for setting in ("2,0", f"{stages},0,{mode}"):
        monkeypatch.setenv("FLAMIA_GLUON_DKDV", setting)
        grads[setting] = backward()
    (dq_p, dk_p, dv_p), (dq_w, dk_w, dv_w) = grads.values()
    assert torch.isfinite(dk_w).all() and torch.isfinite(dv_w).all()
    assert torch.equal(dk_w, dk_p) and torch.equal(dv_w, dv_p) and torch.equal(dq_w, dq_p)
    monkeypatch.setenv("FLAMIA_DQ", "fused")
    with pytest.raises(ValueError, match="does not add dQ"):
        backward()


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("lengths,hq,hkv,d", GPU_CASES + [([8192] * 4, 16, 16, 128)])
def test_warp_specialized_dq_is_the_plain_dq(lengths, hq, hkv, d, poisoned, monkeypatch):
    """FLAMIA_GLUON_DQ=ws|persistent: each query row sees the same MMAs and steps as in the
    plain Gluon dQ kernel, so dQ is the same bits; every element written (poisoned outputs).
    The persistent programs run several tiles each (more work items than SMs in every case)."""
    backward = _backward_case(lengths, hq, hkv, d, seed=9)
    monkeypatch.setenv("FLAMIA_DQ_KERNEL", "gluon")
    dqs = {}
    for mode in ("plain", "ws", "persistent"):
        monkeypatch.setenv("FLAMIA_GLUON_DQ", mode)
        dqs[mode] = backward()[0]
    for mode in ("ws", "persistent"):
        assert torch.isfinite(dqs[mode]).all(), mode
        assert torch.equal(dqs[mode], dqs["plain"]), mode


def test_delta_mode_is_checked(monkeypatch):
    """FLAMIA_DELTA (where BF16's delta comes from with the Gluon dQ kernel) is checked before
    anything is launched."""
    monkeypatch.delenv("FLAMIA_DELTA", raising=False)
    assert K.delta_mode() == "dq"
    _check_setting(monkeypatch, "FLAMIA_DELTA", K.delta_mode, (("kernel", "kernel"),
                                                               ("dq", "dq")),
                   ("DQ", "fused", ""), "FLAMIA_DELTA='.*'; accepted: \\('dq', 'kernel'\\)")
    # refused by a backward on any machine, not only where the Gluon dQ kernel runs (D = 64: a
    # head dim of the compiled kernels, which the plan's tiles are looked up for on a GPU)
    t, h, d = 64, 2, 64
    x = torch.zeros(t, h, d, dtype=torch.bfloat16)
    cu = torch.tensor([0, t], dtype=torch.int32)
    plan = flamia.ops.batch_plan(cu, t, d)
    with pytest.raises(ValueError, match="FLAMIA_DELTA='fused'"):
        monkeypatch.setenv("FLAMIA_DELTA", "fused")
        K.attention_bwd(x, x, x, x, x, torch.zeros(h, t), plan.seg_start, plan.seg_end,
                        plan.order_dkdv, plan.order_dq, d ** -0.5)


@pytest.mark.parametrize("setting,tiles,want", [
    ({}, "grid", ["dq persistent", "dkdv persistent"]),
    ({"FLAMIA_DELTA": "kernel"}, "grid", ["delta", "dkdv persistent", "dq persistent"]),
    ({}, "doc", ["dq ws", "dkdv ws"]),
    ({"FLAMIA_GLUON_DQ": "ws", "FLAMIA_GLUON_DKDV": "2,0,ws"}, "grid", ["dq ws", "dkdv ws"]),
    ({"FLAMIA_DQ": "fused"}, "grid", ["delta", "dkdv plain"]),
])
def test_bf16_backward_launch_order(setting, tiles, want, monkeypatch):
    """The BF16 backward's launches on Hopper, in order (CPU tensors, the capability stubbed,
    every kernel recorded instead of run). By default the persistent dQ kernel computes delta
    and runs before the persistent dK/dV kernel, which reads that delta, and there is no delta
    kernel; FLAMIA_DELTA=kernel is the former order; doc tiles take the warp-specialized
    kernels; the fused-dQ mode keeps the delta kernel."""
    from bench.gluon_report import LaunchRecorder
    from flamia.kernels import attention_hopper as H
    monkeypatch.setattr(K, "INTERPRET", False)
    monkeypatch.setattr(K, "cuda_major", lambda device=None: 9)
    monkeypatch.setattr(H, "cuda_major", lambda device=None: 9)
    monkeypatch.setattr(H, "sm_count", lambda device: 132)
    launches = []
    for name, module, kernel in (
            ("delta", K, "_attn_bwd_delta_kernel"),
            ("dq persistent", H, "_attn_bwd_dq_hopper_persistent_kernel"),
            ("dq ws", H, "_attn_bwd_dq_hopper_ws_kernel"),
            ("dq plain", H, "_attn_bwd_dq_hopper_kernel"),
            ("dkdv persistent", H, "_attn_bwd_dkdv_hopper_persistent_kernel"),
            ("dkdv ws", H, "_attn_bwd_dkdv_hopper_ws_kernel"),
            ("dkdv plain", H, "_attn_bwd_dkdv_hopper_kernel")):
        monkeypatch.setattr(module, kernel, LaunchRecorder(name, launches))
    for env in ("FLAMIA_DELTA", "FLAMIA_GLUON_DQ", "FLAMIA_GLUON_DKDV", "FLAMIA_DQ",
                "FLAMIA_DQ_KERNEL", "FLAMIA_DKDV_KERNEL"):
        monkeypatch.delenv(env, raising=False)
    for env, value in setting.items():
        monkeypatch.setenv(env, value)
    monkeypatch.setenv("FLAMIA_TILES", tiles)
    t, hq, hkv, d = 300, 4, 2, 128
    q, k, v, o, do = (torch.zeros(t, h, d, dtype=torch.bfloat16) for h in (hq, hkv, hkv, hq, hq))
    plan = flamia.ops.batch_plan(torch.tensor([0, 100, 257, t], dtype=torch.int32), t, d)
    lse = torch.zeros(hq, t)
    K.attention_bwd(do, q, k, v, o, lse, plan.seg_start, plan.seg_end, plan.order_dkdv,
                    plan.order_dq, d ** -0.5)
    assert [name for name, *_ in launches] == want


def _delta_kernel(o, do):
    """delta = rowsum(dO * O) [Hq, T] by kernels.attention's delta kernel, launched as
    attention_bwd launches it for BF16."""
    from flamia.kernels import quantize
    total, hq, d = o.shape
    delta = torch.empty(hq, total, device=o.device)
    block_t, tiles = quantize.quantizer_grid(total, False)
    K._attn_bwd_delta_kernel[(tiles, hq)](
        o, do, delta, delta, delta, delta, delta, o.stride(0), o.stride(1), do.stride(0),
        do.stride(1), delta.stride(0), 0, total, HEAD_DIM=d, BLOCK_T=block_t, IS_FP8=False)
    return delta


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("mode,tiles", [("ws", "grid"), ("plain", "grid"),
                                        ("persistent", "grid"), ("ws", "doc"), ("plain", "doc")])
@pytest.mark.parametrize("lengths,hq,hkv,d", GPU_CASES)
def test_delta_in_the_dq_kernel_is_the_delta_kernel(lengths, hq, hkv, d, mode, tiles, poisoned,
                                                    monkeypatch):
    """FLAMIA_DELTA=dq (the default): the Gluon dQ kernel computes delta from its dO and O tiles
    (by TMA with Q) with the delta kernel's layout, so every row's delta is the delta kernel's
    bits (compared directly, every row written: the buffer starts as NaN), and dQ, dK, dV are
    the same bits as with FLAMIA_DELTA=kernel (the dK/dV kernel then reads the delta the dQ
    kernel wrote)."""
    from flamia.kernels import attention_hopper as H
    monkeypatch.setenv("FLAMIA_GLUON_DQ", mode)
    monkeypatch.setenv("FLAMIA_TILES", tiles)
    backward = _backward_case(lengths, hq, hkv, d, seed=10)
    grads = {}
    for where in ("kernel", "dq"):
        monkeypatch.setenv("FLAMIA_DELTA", where)
        grads[where] = backward()
    for name, a, b in zip(("dQ", "dK", "dV"), grads["kernel"], grads["dq"]):
        assert torch.isfinite(b).all(), f"{name}: non-finite (unwritten?) elements"
        assert torch.equal(a, b), f"{name} differs between FLAMIA_DELTA=kernel and dq"
    # delta itself, from the forward's O of a fresh case
    cu = _cu(lengths, "cuda")
    q, k, v, do = rand_qkvdo(sum(lengths), hq, hkv, d, seed=11, device="cuda")
    plan = flamia.ops.batch_plan(cu, q.shape[0], d)
    o, lse = K.attention_fwd(q, k, v, plan.seg_start, plan.order_fwd, d ** -0.5,
                             seg_end=plan.seg_end)
    delta = torch.full_like(lse, float("nan"))
    H.attention_dq_hopper(q, k, v, do, lse, delta, plan.seg_start, plan.order_dq, d ** -0.5,
                          torch.empty_like(q), plan.seg_end, tiles == "doc", o=o)
    assert torch.equal(delta, _delta_kernel(o, do))


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("lengths,hq,hkv,d", GPU_CASES)
def test_gluon_dq_matches_triton_dq(lengths, hq, hkv, d, monkeypatch):
    """Same tiles (128 queries x 64 keys), same recipe (bf16 dS): only the order of fp32
    accumulation inside the MMAs can differ."""
    backward = _backward_case(lengths, hq, hkv, d, seed=6)
    dqs = {}
    for kernel in ("triton", "gluon"):
        monkeypatch.setenv("FLAMIA_DQ_KERNEL", kernel)
        dqs[kernel] = backward()[0]
    ref = dqs["triton"].float()
    rel = ((dqs["gluon"].float() - ref).norm() / ref.norm()).item()
    assert rel < 1e-3, f"dQ: relative difference {rel:.2e}"


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("lengths,hq,hkv,d", GPU_CASES)
def test_gluon_dkdv_matches_triton_dkdv(lengths, hq, hkv, d, monkeypatch):
    """Same tiles (64 queries x 128 keys), same recipe (bf16 P^T and dS^T, the GQA group's heads
    summed in registers in the same order): only the order of fp32 accumulation inside the MMAs
    can differ."""
    backward = _backward_case(lengths, hq, hkv, d, seed=7)
    grads = {}
    for kernel in ("triton", "gluon"):
        monkeypatch.setenv("FLAMIA_DKDV_KERNEL", kernel)
        grads[kernel] = backward()[1:]
    for name, ref, got in zip(("dK", "dV"), grads["triton"], grads["gluon"]):
        rel = ((got.float() - ref.float()).norm() / ref.float().norm()).item()
        assert rel < 1e-3, f"{name}: relative difference {rel:.2e}"


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("lengths,hq,hkv,d", GPU_CASES)
def test_gluon_fused_dq(lengths, hq, hkv, d, monkeypatch):
    """FLAMIA_DQ=fused with the Gluon dK/dV kernel: dQ added in key-tile order is the same bits
    on every run, and agrees with the triton kernels' separate dQ up to accumulation order
    (dK, dV: same tiles and recipe)."""
    cu = _cu(lengths, "cuda")
    q, k, v, do = rand_qkvdo(sum(lengths), hq, hkv, d, seed=8, device="cuda")
    runs = {}
    for name, kernel, mode in (("triton", "triton", "separate"), ("fused", "gluon", "fused"),
                               ("again", "gluon", "fused")):
        monkeypatch.setenv("FLAMIA_DKDV_KERNEL", kernel)
        monkeypatch.setenv("FLAMIA_DQ_KERNEL", kernel)
        monkeypatch.setenv("FLAMIA_DQ", mode)
        plan = flamia.ops.batch_plan(cu, q.shape[0], d)
        o, lse = K.attention_fwd(q, k, v, plan.seg_start, plan.order_fwd, d ** -0.5)
        runs[name] = K.attention_bwd(do, q, k, v, o, lse, plan.seg_start, plan.seg_end,
                                     plan.order_dkdv, plan.order_dq, d ** -0.5)
    for name, ref, got, again, tol in zip(("dQ", "dK", "dV"), runs["triton"], runs["fused"],
                                          runs["again"], (4e-3, 1e-3, 1e-3)):
        assert torch.equal(got, again), f"{name}: two runs of the fused mode differ"
        rel = ((got.float() - ref.float()).norm() / ref.float().norm()).item()
        assert rel < tol, f"{name}: relative difference {rel:.2e}"


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("kernel", ["triton", "gluon"])
def test_fused_dq_at_scale(kernel, monkeypatch):
    """FLAMIA_DQ=fused where far more dK/dV programs than fit on the GPU wait for each other
    (4 x 8192-token documents, 16 heads: 4096 programs of the Gluon kernel), three runs: the
    ordered adds end (a wait for an exact counter value hung here, 2026-12-04) and give the same
    bits every run."""
    monkeypatch.setenv("FLAMIA_DKDV_KERNEL", kernel)
    monkeypatch.setenv("FLAMIA_DQ", "fused")
    cu = _cu([8192] * 4, "cuda")
    q, k, v, do = rand_qkvdo(4 * 8192, 16, 16, 128, seed=9, device="cuda")
    plan = flamia.ops.batch_plan(cu, q.shape[0], 128)
    o, lse = K.attention_fwd(q, k, v, plan.seg_start, plan.order_fwd, 128 ** -0.5)
    runs = [K.attention_bwd(do, q, k, v, o, lse, plan.seg_start, plan.seg_end, plan.order_dkdv,
                            plan.order_dq, 128 ** -0.5)[0] for _ in range(3)]
    torch.cuda.synchronize()
    assert torch.equal(runs[0], runs[1]) and torch.equal(runs[0], runs[2])
    assert torch.isfinite(runs[0]).all()


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("lengths,hq,hkv,d", GPU_CASES + [([8192] * 4, 16, 16, 128),
                                                          ([31, 33, 1, 64, 65, 200] * 8, 8, 2, 64)])
def test_doc_tiles_gluon(lengths, hq, hkv, d, poisoned, monkeypatch):
    """Doc tiles (FLAMIA_TILES=doc) in the Gluon kernels, fwd + bwd through flamia.attention:
    finite everywhere with poisoned outputs (the rows of a document's last tile are stored by a
    masked register store, the others by TMA: each written once); the plain Gluon forward and
    dQ kernels give the warp-specialized ones' bits (same steps per row); the triton kernels on
    the same doc tiles and the Gluon kernels on grid tiles agree within bf16 rounding (other
    key-tile boundaries move P's and dS's rounding points)."""
    cu = _cu(lengths, "cuda")
    q, k, v, do = rand_qkvdo(sum(lengths), hq, hkv, d, seed=11, device="cuda")

    def run(tiles, kernel="gluon", fwd=None, dq=None):
        env = {"FLAMIA_TILES": tiles, "FLAMIA_GLUON_FWD": fwd, "FLAMIA_GLUON_DQ": dq,
               **{name: kernel for name in GLUON_ENVS}}
        for name, value in env.items():
            if value is None:
                monkeypatch.delenv(name, raising=False)
            else:
                monkeypatch.setenv(name, value)
        return attention_forward_backward(_triton, q, k, v, do, cu)

    doc = run("doc")
    for name, t in zip("O dQ dK dV".split(), doc):
        assert torch.isfinite(t).all(), f"{name}: non-finite (unwritten?) elements"
    plain = run("doc", fwd="128,128,8,2", dq="plain")
    assert torch.equal(plain[0], doc[0]) and torch.equal(plain[1], doc[1])
    for other in (run("doc", kernel="triton"), run("grid")):
        for name, a, b in zip("O dQ dK dV".split(), doc, other):
            rel = ((a.float() - b.float()).norm() / b.float().norm()).item()
            assert rel < 4e-3, f"{name}: relative difference {rel:.2e}"


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("dq_mode,fwd,dkdv,dq", [
    ("separate", "128,128,8,2", "2,0", "plain"), ("fused", "128,128,8,2", "2,0", "plain"),
    ("separate", "128,128,8,2,ws", "2,0,ws", "ws"),
    ("separate", "128,128,8,2,pingpong", "3,0,ws", "ws"),
    ("separate", "128,128,8,2,persistent", "2,0,ws,tma", "persistent"),
    ("separate", "128,128,8,2,persistent", "2,0,persistent,tma", "persistent"),
    ("separate", "128,128,8,2,persistent", "2,0,persistent", "persistent"),
    ("separate", "128,64,8,2,persistent", "2,0,ws,tma", "ws"),
    ("separate", "128,128,8,2,ws", "2,0,ws,tma", "ws"),
    ("separate", "128,128,8,2,ws", "2,0,ws,doc", "ws"),
    ("separate", "128,128,8,2", "2,0,ws,tma,doc", "plain")])
def test_gluon_kernels_do_not_leak(dq_mode, fwd, dkdv, dq, gluon_kernels, monkeypatch):
    """The probes with each Gluon configuration asked for; a trailing ",tma" on the dK/dV
    setting: FLAMIA_GLUON_DKDV_LSE=tma (T = 4096, a multiple of 4); ",doc": doc tiles
    (FLAMIA_TILES=doc) in all three kernels."""
    dkdv, doc, _ = dkdv.partition(",doc")
    monkeypatch.setenv("FLAMIA_TILES", "doc" if doc else "grid")
    dkdv, tma, _ = dkdv.partition(",tma")
    monkeypatch.setenv("FLAMIA_GLUON_DKDV_LSE", "tma" if tma else "load")
    monkeypatch.setenv("FLAMIA_DQ", dq_mode)
    monkeypatch.setenv("FLAMIA_GLUON_FWD", fwd)
    monkeypatch.setenv("FLAMIA_GLUON_DKDV", dkdv)
    monkeypatch.setenv("FLAMIA_GLUON_DQ", dq)
    total = 4096
    cu = adversarial_cu_seqlens(total, device="cuda")
    q, k, v, do = rand_qkvdo(total, 8, 2, 128, seed=4, device="cuda")
    res = probe_attention(_triton, q, k, v, cu, do, max_targets=3)
    for r in res.values():
        assert r.n_compared > 0
        assert r.max_abs_delta == 0.0, str(r)


def _fp8_forward_inputs(lengths, hq, hkv, d, recipe, seed=7):
    """Q, K, V of a GPU case quantized as the FP8 forward quantizes them, and its ``fp8``
    arguments (kernels.attention.attention_fwd)."""
    from flamia.kernels.quantize import quantize_qkv

    q, k, v, _ = rand_qkvdo(sum(lengths), hq, hkv, d, seed=seed, device="cuda")
    q8, sq, k8, _, vt8, skv = quantize_qkv(q, k, v, qk_nvfp4=recipe == "nvfp4_fp8")
    return q8, k8, {"sq": sq, "skv": skv, "vt": vt8, "qk_bf16": recipe == "nvfp4_fp8"}


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("mode", ["inflight", "overlap"])
@pytest.mark.parametrize("recipe", ["mxfp8", "nvfp4_fp8"])
@pytest.mark.parametrize("lengths,hq,hkv,d", GPU_CASES + [([8192] * 4, 16, 16, 128)])
def test_gluon_fp8_forward_is_the_triton_fp8_forward(lengths, hq, hkv, d, recipe, mode, poisoned,
                                                      monkeypatch):
    """The warp-specialized Gluon FP8 forward (128-query tiles) computes the triton FP8 forward's
    function (64-query tiles) on the same 64-key tiles: the same MMAs per tile, P' quantized per
    row of the same tiles, O updated as O * alpha + X * scale in the same order (see _fwd8_step;
    both ways of waiting for the step's MMAs, FLAMIA_GLUON_FWD8): the same bits. Every element
    written (poisoned outputs)."""
    cu = _cu(lengths, "cuda")
    q8, k8, fp8 = _fp8_forward_inputs(lengths, hq, hkv, d, recipe)
    monkeypatch.setenv("FLAMIA_GLUON_FWD8", mode)
    outs = {}
    for kernel in ("triton", "gluon"):
        monkeypatch.setenv("FLAMIA_FWD_KERNEL", kernel)
        plan = flamia.ops.batch_plan(cu, q8.shape[0], d, fp8=True)
        outs[kernel] = K.attention_fwd(q8, k8, None, plan.seg_start, plan.order_fwd, d ** -0.5,
                                       fp8=fp8)
    (o_t, lse_t), (o_g, lse_g) = outs["triton"], outs["gluon"]
    assert torch.isfinite(o_g).all() and torch.isfinite(lse_g).all()
    rel = ((o_g.float() - o_t.float()).norm() / o_t.float().norm()).item()
    assert torch.equal(o_g, o_t), f"O differs: relative {rel:.2e}"
    assert torch.equal(lse_g, lse_t), f"lse2 differs: max {(lse_g - lse_t).abs().max():.2e}"


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("recipe", ["mxfp8", "nvfp4_fp8"])
@pytest.mark.parametrize("kernels", [("FLAMIA_FWD_KERNEL", ),
                                     ("FLAMIA_FWD_KERNEL", "FLAMIA_DKDV_KERNEL")])
def test_gluon_fp8_kernels_do_not_leak(recipe, kernels, monkeypatch):
    """The probes on the FP8 recipes with the Gluon FP8 forward, and the Gluon FP8 dK/dV kernel,
    asked for (no fallback)."""
    for env in kernels:
        monkeypatch.setenv(env, "gluon")
    _assert_fp8_probes_zero(recipe)


def _assert_fp8_probes_zero(recipe):
    """The probes of the FP8 recipe through flamia.attention under the environment of the
    moment (adversarial segments, GQA 8/2): every one compares something and finds exactly 0."""
    total = 4096
    cu = adversarial_cu_seqlens(total, device="cuda")
    q, k, v, do = rand_qkvdo(total, 8, 2, 128, seed=4, device="cuda")
    res = probe_attention(
        lambda *a: flamia.attention(*a, total, recipe=recipe, impl="triton"), q, k, v, cu, do,
        max_targets=3)
    for r in res.values():
        assert r.n_compared > 0
        assert r.max_abs_delta == 0.0, str(r)


@pytest.mark.gpu
@hopper
def test_gluon_fp8_forward_refuses_bad_inputs():
    """Wrong dtypes and layouts raise with what is accepted."""
    from flamia.kernels import attention_hopper as H

    q8, k8, fp8 = _fp8_forward_inputs([100, 156], 4, 4, 128, "mxfp8")
    o = torch.empty(q8.shape, dtype=torch.bfloat16, device="cuda")
    lse = torch.empty(q8.shape[1], q8.shape[0], device="cuda")
    args = (fp8["sq"], fp8["skv"], torch.zeros(3, dtype=torch.int32, device="cuda"),
            torch.zeros(2, dtype=torch.int32, device="cuda"), 0.1, o, lse)
    with pytest.raises(ValueError, match="q must be torch.bfloat16 or torch.float8_e4m3fn"):
        H.attention_fwd8_hopper(q8.float(), k8, fp8["vt"], *args)
    with pytest.raises(ValueError, match="one dtype"):
        H.attention_fwd8_hopper(q8, k8.bfloat16(), fp8["vt"], *args)
    with pytest.raises(ValueError, match="token-contiguous copy"):
        H.attention_fwd8_hopper(q8, k8, fp8["vt"].bfloat16(), *args)


def _fp8_gradients(lengths, hq, hkv, d, recipe, seed=3):
    """dQ, dK, dV of the FP8 recipe through flamia.attention under the environment of the
    moment, on a GPU case with outlier-heavy inputs (a few columns scaled up, so the per-row
    scales of P'^T and dS'^T differ between rows and tiles)."""
    total = sum(lengths)
    cu = _cu(lengths, "cuda")
    q, k, v, do = rand_qkvdo(total, hq, hkv, d, seed=seed, device="cuda")
    q[:, :, :3] *= 8
    v[::7] *= 16
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    o = flamia.attention(q, k, v, cu, total, recipe=recipe, impl="triton")
    o.backward(do)
    return q.grad, k.grad, v.grad


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("recipe", ["mxfp8", "nvfp4_fp8"])
@pytest.mark.parametrize("lengths,hq,hkv,d", GPU_CASES + [([8192] * 2, 8, 8, 128)])
def test_gluon_fp8_dkdv_is_the_triton_fp8_dkdv(lengths, hq, hkv, d, recipe, poisoned,
                                                monkeypatch):
    """The warp-specialized Gluon FP8 dK/dV kernel (FLAMIA_DKDV_KERNEL=gluon) computes the
    triton FP8 dK/dV kernels' function on the same tiles: the same MMAs per tile, P'^T and
    dS'^T quantized per row of the same tiles, dK and dV updated as acc + X * scale in the same
    order (attention_hopper.DKDV8_CONFIG): the same bits as the triton split kernels and as the
    fused one, with every schedule of its partitions (no setting: 3,pipe, in flight, mxfp8's
    default; FLAMIA_GLUON_DKDV8=2: each partition waits for its MMAs, nvfp4_fp8's default and
    mxfp8's before 2026-12-07; 3,pipe named; 3,pair and 2,pair: two query tiles per step, odd
    ranges and several query heads per kv head in GPU_CASES; 3,pipe,pt3, 2,pt3 and 3,pair,pt3:
    three P^T tiles in flight between the partitions, which with pair steps wrap across steps),
    and as the default (no setting: the Gluon kernel on Hopper). Every element written
    (poisoned outputs)."""
    grads = {}
    gluon = [f"gluon {s}" for s in ("2", "3,pipe", "3,pair", "2,pair", "3,pipe,pt3", "2,pt3",
                                    "3,pair,pt3")]
    for name, env in [("split", {"FLAMIA_DKDV_KERNEL": "triton"}), ("default", {}),
                      ("fused", {"FLAMIA_DKDV_KERNEL": "triton", "FLAMIA_FP8_DKDV": "fused"}),
                      ("gluon", {"FLAMIA_DKDV_KERNEL": "gluon"})] + [
            (name, {"FLAMIA_DKDV_KERNEL": "gluon", "FLAMIA_GLUON_DKDV8": name.split()[1]})
            for name in gluon]:
        for key in ("FLAMIA_DKDV_KERNEL", "FLAMIA_FP8_DKDV", "FLAMIA_GLUON_DKDV8"):
            monkeypatch.delenv(key, raising=False)
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        grads[name] = _fp8_gradients(lengths, hq, hkv, d, recipe)
    for name in ["default", "fused", "gluon"] + gluon:
        for t, a, b in zip("dQ dK dV".split(), grads[name], grads["split"]):
            assert torch.isfinite(a).all(), f"{name} {t}: non-finite (unwritten?) elements"
            rel = ((a.float() - b.float()).norm() / b.float().norm()).item()
            assert torch.equal(a, b), f"{name} {t} differs from the split kernels': {rel:.2e}"


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("recipe", ["mxfp8", "nvfp4_fp8"])
@pytest.mark.parametrize("lengths,hq,hkv,d", GPU_CASES[:2] + [(U_SHORT_DOCS, 8, 2, 128)])
def test_gluon_fp8_dkdv_persistent_is_the_plain_kernel(lengths, hq, hkv, d, recipe, poisoned,
                                                       monkeypatch):
    """The persistent FP8 dK/dV kernel (FLAMIA_GLUON_DKDV8=...,persistent: one program per SM
    taking (kv head, key tile) items from a queue, K and V in two slots, the ring running on
    across items) computes each item as the plain kernel computes its tile: the same bits, with
    both schedules (3,pipe in flight, 2 waiting for the MMAs) and, on many short documents
    (programs take several items, most of them short), three P^T slots, whose ring also runs on
    across items; every element written (poisoned outputs)."""
    monkeypatch.setenv("FLAMIA_DKDV_KERNEL", "gluon")
    for plain in ("3,pipe", "2") + (("3,pipe,pt3", ) if lengths is U_SHORT_DOCS else ()):
        monkeypatch.setenv("FLAMIA_GLUON_DKDV8", plain)
        want = _fp8_gradients(lengths, hq, hkv, d, recipe)
        monkeypatch.setenv("FLAMIA_GLUON_DKDV8", plain + ",persistent")
        got = _fp8_gradients(lengths, hq, hkv, d, recipe)
        for t, a, b in zip("dQ dK dV".split(), got, want):
            assert torch.isfinite(a).all(), f"{plain} {t}: non-finite (unwritten?) elements"
            rel = ((a.float() - b.float()).norm() / b.float().norm()).item()
            assert torch.equal(a, b), f"{plain},persistent {t} differs from the plain: {rel:.2e}"


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("recipe", ["mxfp8", "nvfp4_fp8"])
def test_gluon_fp8_dkdv_persistent_does_not_leak(recipe, monkeypatch):
    """The probes with the persistent FP8 dK/dV kernel asked for (no fallback); pair steps,
    which it does not run, are refused with what is accepted."""
    monkeypatch.setenv("FLAMIA_DKDV_KERNEL", "gluon")
    monkeypatch.setenv("FLAMIA_GLUON_DKDV8", "persistent")
    _assert_fp8_probes_zero(recipe)
    monkeypatch.setenv("FLAMIA_GLUON_DKDV8", "3,pair,persistent")
    with pytest.raises(ValueError, match="not pair steps; accepted"):
        _fp8_gradients([100, 156], 4, 4, 128, recipe)


@pytest.mark.gpu
@hopper
def test_gluon_fp8_kernels_refuse_other_mma_modes(monkeypatch):
    """The Gluon FP8 kernels run Hopper's fast FP8 MMA only: asked for with another
    FLAMIA_FP8_MMA, they raise with what is accepted instead of running another function; so do
    tiles other than the kernel's (FLAMIA_BWD_BLOCKS)."""
    q, k, v, do = rand_qkvdo(256, 4, 4, 128, device="cuda")
    cu = _cu([100, 156], "cuda")
    q.requires_grad_()
    run = lambda: flamia.attention(q, k, v, cu, 256, recipe="mxfp8", impl="triton").backward(do)
    monkeypatch.setenv("FLAMIA_FP8_MMA", "precise")
    for env in ("FLAMIA_FWD_KERNEL", "FLAMIA_DKDV_KERNEL"):
        monkeypatch.setenv(env, "gluon")
        with pytest.raises(ValueError, match=f"{env}=gluon: FLAMIA_FP8_MMA=precise"):
            run()
        monkeypatch.setenv(env, "triton")
    monkeypatch.setenv("FLAMIA_FP8_MMA", "fast")
    monkeypatch.setenv("FLAMIA_DKDV_KERNEL", "gluon")
    monkeypatch.setenv("FLAMIA_BWD_BLOCKS", "64,128")
    with pytest.raises(ValueError, match="the Gluon FP8 kernel's are"):
        run()


@pytest.mark.gpu
@hopper
def test_gluon_fp8_dkdv_refuses_bad_inputs():
    """Wrong dtypes and token-major copies raise with what is accepted."""
    from flamia.kernels import attention_hopper as H

    t = 256
    q8, k8, fp8 = _fp8_forward_inputs([100, 156], 4, 4, 128, "mxfp8")
    v8 = q8.clone()
    qt = torch.zeros(4, 128, 256, dtype=q8.dtype, device="cuda")
    qrow = torch.zeros(4, t, 4, device="cuda")
    dk, dv = (torch.empty(k8.shape, dtype=torch.bfloat16, device="cuda") for _ in range(2))
    args = (qrow, fp8["skv"], torch.full((t, ), t, dtype=torch.int32, device="cuda"),
            torch.zeros(4, dtype=torch.int32, device="cuda"), 0.1, dk, dv)
    with pytest.raises(ValueError, match="one dtype"):
        H.attention_dkdv8_hopper(q8, k8.bfloat16(), v8, q8, qt, qt, *args)
    with pytest.raises(ValueError, match="v and do must be torch.float8_e4m3fn"):
        H.attention_dkdv8_hopper(q8, k8, v8.bfloat16(), q8, qt, qt, *args)
    with pytest.raises(ValueError, match="qt must be a token-contiguous copy"):
        H.attention_dkdv8_hopper(q8, k8, v8, q8, qt[:, :, :100], qt, *args)
    with pytest.raises(ValueError, match="dot must be a token-contiguous copy"):
        H.attention_dkdv8_hopper(q8, k8, v8, q8, qt, qt.transpose(1, 2), *args)


@pytest.mark.gpu
@hopper
def test_gluon_forward_unsupported_layouts(monkeypatch):
    """Q with its heads apart (stride(1) != D, no TMA view [T, H * D]): FLAMIA_FWD_KERNEL=gluon
    refuses it with the reason; auto runs the triton forward instead (same result as triton)."""
    q, k, v, _ = rand_qkvdo(256, 4, 4, 128, device="cuda")
    cu = _cu([100, 156], "cuda")
    q_heads_apart = q.transpose(0, 1).contiguous().transpose(0, 1)
    monkeypatch.setenv("FLAMIA_FWD_KERNEL", "gluon")
    with pytest.raises(ValueError, match="heads adjacent"):
        _triton(q_heads_apart, k, v, cu)
    monkeypatch.setenv("FLAMIA_FWD_KERNEL", "auto")
    o_auto = _triton(q_heads_apart, k, v, cu)
    monkeypatch.setenv("FLAMIA_FWD_KERNEL", "triton")
    assert torch.equal(o_auto, _triton(q_heads_apart, k, v, cu))
