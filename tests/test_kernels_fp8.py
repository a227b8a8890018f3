"""MXFP8 Triton path against the reference recipe (same numerics), the probes, and the floor.
Interpreter tier on CPU (TRITON_INTERPRET=1 from conftest) and GPU tier (marked gpu)."""

import pytest
import torch

import flamia
from flamia.formats import E4M3
from flamia.kernels import attention as K
from flamia.kernels.quantize import quantize_mx_token
from flamia.probes import adversarial_cu_seqlens, probe_attention
from flamia.reference import attention_forward_backward, quantize_operand

from conftest import DEVICE, rand_qkvdo
from test_kernels import _cu

# Kernel vs reference tolerance (relative L2). Both compute the same recipe on the same E4M3
# values; only the accumulation of S, dP and the in-register products differs. A difference in S
# can flip the E4M3 rounding of an entry of P' (one E4M3 step, 2^-3 relative) lying that close to
# a rounding midpoint. Interpreter (exact fp32 accumulation, another order): 0 to 5e-7 for
# mxfp8 and nvfp4_fp8; fp8_rowwise's case 0 has one such flip in dS' (from an accumulation-order
# difference upstream of it): dQ 1.6e-4 on these few hundred tokens, so the bound allows one
# flip. H200: Hopper's FP8 tensor cores do not accumulate in full fp32 within one MMA
# instruction (bench/fp8_check.py measures it), which moves S far more than fp32 reordering and
# flips more entries: measured 3e-3 (O) to 7e-3 (dQ, dK) for mxfp8, a tenth of the recipe's
# quantization floor (4-6%); the bound 1.5e-2 leaves 2x for longer documents.
TOL = {"cpu": 3e-4, "cuda": 1.5e-2}


def _fp8(q, k, v, cu, recipe="mxfp8"):
    return flamia.attention(q, k, v, cu, q.shape[0], recipe=recipe, impl="triton")


# The token-major copy: stored by the quantizer (fused; MX only, NVFP4 data is copied), the
# Triton copy kernel, or torch's copy.
TRANSPOSE_MODES = pytest.mark.parametrize("transpose", ["fused", "triton", "torch"])


@TRANSPOSE_MODES
def test_nvfp4_quantizer_matches_reference(transpose, monkeypatch):
    from bench.quantizer import _bits as bits
    from flamia.kernels.quantize import quantize_nvfp4_token

    monkeypatch.setenv("FLAMIA_FP8_TRANSPOSE", transpose)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(70, 2, 128, generator=g) * torch.exp2(
        torch.randint(-20, 20, (70, 2, 1), generator=g).float())
    x[3] = 0.0
    x[4, 1, :16] = 0.0  # an all-zero block inside a non-zero token
    x[5, 0, 0] = 1e4  # one loud element: the other blocks' UE4M3 scales go subnormal
    x = x.bfloat16().to(DEVICE)
    data, data_t, s = quantize_nvfp4_token(x)
    ref_data, ref_scale = quantize_operand(x, "nvfp4_token")
    assert torch.equal(s.t(), ref_scale)
    # bit for bit, the sign of each zero included (torch.equal takes -0.0 == 0.0)
    assert torch.equal(bits(data), bits(ref_data))
    assert (bits(ref_data) == torch.iinfo(torch.int32).min).any()  # the case has -0.0 entries
    assert torch.equal(bits(data_t[..., : x.shape[0]].permute(2, 0, 1)), bits(ref_data))
    assert not data_t[..., x.shape[0]:].float().any()  # zero padding (token_major_copy)


@TRANSPOSE_MODES
def test_quantizer_matches_reference(transpose, monkeypatch):
    monkeypatch.setenv("FLAMIA_FP8_TRANSPOSE", transpose)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(97, 3, 64, generator=g) * torch.exp2(
        torch.randint(-30, 30, (97, 3, 1), generator=g).float())
    x[5] = 0.0  # all-zero rows: scale 1
    x[6, 0, :] = 448.0  # exactly the max: scale 1
    x[6, 1, 0] = 464.0  # just over (the next bf16 after 448 is 450): scale 2
    x[7, 2, :] = 2.0**-125  # tiny (fp32-normal) block: the E8M0 exponent clamps to -127
    x = x.bfloat16().to(DEVICE)
    x8, xt8, s = quantize_mx_token(x)
    data, scale = quantize_operand(x, "mx_token")
    assert torch.equal(s.t(), scale)
    assert torch.equal(x8.float(), data)
    assert torch.equal(xt8[..., : x.shape[0]].permute(2, 0, 1).float(), data)
    assert xt8.shape[-1] % 128 == 0 and not xt8[..., x.shape[0]:].float().any()
    if DEVICE == "cuda":  # bit-exact bytes against torch's saturating RNE cast
        ref_bytes = data.clamp(-E4M3.max_normal, E4M3.max_normal).to(torch.float8_e4m3fn)
        assert torch.equal(x8.view(torch.uint8), ref_bytes.view(torch.uint8))
        xt_bytes = xt8[..., : x.shape[0]].permute(2, 0, 1).contiguous().view(torch.uint8)
        assert torch.equal(xt_bytes, ref_bytes.view(torch.uint8))


@TRANSPOSE_MODES
def test_fp32_token_quantizer_matches_reference(transpose, monkeypatch):
    """fp8_rowwise's quantizer: fp32 scale amax / 448 (IEEE division, as the reference), E4M3
    data x / scale; the same values as flamia.reference.quantize_operand(x, "fp32_token")."""
    from flamia.kernels.quantize import quantize_fp32_token

    monkeypatch.setenv("FLAMIA_FP8_TRANSPOSE", transpose)
    g = torch.Generator().manual_seed(3)
    x = torch.randn(97, 3, 64, generator=g) * torch.exp2(
        torch.randint(-30, 30, (97, 3, 1), generator=g).float())
    x[5] = 0.0  # all-zero rows: scale 1
    x[6, 0, 0] = 1e4  # one loud element: the rest of its token lands near E4M3's subnormals
    x = x.bfloat16().to(DEVICE)
    x8, xt8, s = quantize_fp32_token(x)
    data, scale = quantize_operand(x, "fp32_token")
    assert torch.equal(s.t(), scale)
    assert not torch.equal(scale, torch.exp2(torch.log2(scale).round()))  # not powers of two
    assert torch.equal(x8.float(), data)
    assert torch.equal(xt8[..., : x.shape[0]].permute(2, 0, 1).float(), data)
    assert xt8.shape[-1] % 128 == 0 and not xt8[..., x.shape[0]:].float().any()


@pytest.fixture
def poisoned(monkeypatch):
    monkeypatch.setattr(K, "empty", lambda shape, **kw: torch.full(shape, float("nan"), **kw))


CASES = {
    "cpu": [([1, 7, 129, 63, 100], 4, 2, 64), ([70, 58], 2, 1, 128)],
    "cuda": [([1, 7, 129, 1000, 4001, 63], 16, 4, 128), ([300] * 20 + [37, 8192], 8, 2, 64)],
}


# dkdv: the triton FP8 dK/dV kernels, as a dV-only and a dK-only kernel or one fused kernel
# (FLAMIA_FP8_DKDV names them, so they run on Hopper too, where the Gluon kernel is the default)
@pytest.mark.parametrize("recipe,case,dkdv", [("mxfp8", 0, "split"), ("mxfp8", 1, "split"),
                                              ("nvfp4_fp8", 0, "split"), ("mxfp8", 0, "fused"),
                                              ("fp8_rowwise", 0, "split"),
                                              ("fp8_rowwise", 1, "fused"),
                                              ("fp8_rowwise", 1, "default")])
def test_fp8_kernel_matches_reference_recipe(recipe, case, dkdv, poisoned, monkeypatch):
    # default: the kernels a plain call runs (on Hopper the Gluon FP8 dK/dV kernel)
    if dkdv == "default":
        monkeypatch.delenv("FLAMIA_FP8_DKDV", raising=False)
    else:
        monkeypatch.setenv("FLAMIA_FP8_DKDV", dkdv)
    lengths, hq, hkv, d = CASES[DEVICE][case]
    cu = _cu(lengths, DEVICE)
    q, k, v, do = rand_qkvdo(sum(lengths), hq, hkv, d, seed=10 + case, device=DEVICE)
    ours = attention_forward_backward(lambda *a: _fp8(*a, recipe=recipe), q, k, v, do, cu)
    ref = attention_forward_backward(flamia.reference_attention, q, k, v, do, cu, recipe=recipe)
    for name, a, b in zip("O dQ dK dV".split(), ours, ref):
        assert torch.isfinite(a).all(), f"{name}: non-finite (unwritten?) elements"
        rel = ((a.float() - b.float()).norm() / b.float().norm()).item()
        assert rel < TOL[DEVICE], f"{name}: relative difference {rel:.2e} to the reference recipe"


@pytest.mark.parametrize("recipe,dkdv", [("mxfp8", "split"), ("nvfp4_fp8", "split"),
                                         ("mxfp8", "fused"), ("fp8_rowwise", "split")])
def test_fp8_kernel_does_not_leak(recipe, dkdv, monkeypatch):
    monkeypatch.setenv("FLAMIA_FP8_DKDV", dkdv)
    total = 192 if DEVICE == "cpu" else 2048
    cu = adversarial_cu_seqlens(total, device=DEVICE)
    q, k, v, do = rand_qkvdo(total, 4, 2, 64, seed=12, device=DEVICE)
    res = probe_attention(lambda *a: _fp8(*a, recipe=recipe), q, k, v, cu, do, max_targets=3)
    for r in res.values():
        assert r.n_compared > 0
        assert r.max_abs_delta == 0.0, str(r)


def test_dkdv_mode_is_checked(monkeypatch):
    monkeypatch.setenv("FLAMIA_FP8_DKDV", "split")
    assert K.dkdv_parts(True) == (1, 2) and K.dkdv_parts(False) == (0,)
    monkeypatch.setenv("FLAMIA_FP8_DKDV", "fused")
    assert K.dkdv_parts(True) == (0,)
    monkeypatch.setenv("FLAMIA_FP8_DKDV", "atomic")
    with pytest.raises(ValueError, match="accepted"):
        K.dkdv_parts(True)


@pytest.mark.gpu
def test_mxfp8_kernel_accuracy_checks_gpu():
    from flamia.report import accuracy_checks, accuracy_rows

    rows = accuracy_rows("triton", total=512, hq=2, hkv=2, d=128, device="cuda")
    rows = [r for r in rows if r["recipe"] in ("mxfp8", "mxfp8 floor", "fp8_tensorwise", "bf16")]
    failed = [text for text, ok in accuracy_checks(rows) if not ok]
    assert not failed, failed


def test_mxfp8_opcheck():
    from flamia.ops import attention_fwd_fp8, batch_plan

    total, d = 64, 64
    cu = _cu([20, 44], DEVICE)
    q, k, v, _ = rand_qkvdo(total, 4, 2, d, seed=13, device=DEVICE)
    plan = batch_plan(cu, total, d, fp8=True)
    args = (q.requires_grad_(), k.requires_grad_(), v.requires_grad_(), plan.seg_start,
            plan.seg_end, plan.order_fwd, plan.order_dkdv, plan.order_dq, d**-0.5, "mxfp8")
    checks = ("test_schema", "test_autograd_registration", "test_faketensor",
              "test_aot_dispatch_dynamic")
    if DEVICE == "cuda":
        # aot_dispatch builds its loss by summing every output, and torch has no CUDA sum for
        # float8 (the op returns the E4M3 tensors it saves); the CPU tier (bf16 storage) runs it.
        checks = checks[:3]
    torch.library.opcheck(attention_fwd_fp8, args, test_utils=checks)


@pytest.mark.parametrize("recipe", ["bf16", "mxfp8", "nvfp4_fp8", "fp8_rowwise"])
def test_eager_path_is_the_custom_op(recipe):
    """Eager calls run the ops' functions through ops._EagerAttention (no torch.library
    dispatch); the registered custom ops with their autograd formulas compute the same bits:
    O and the three gradients."""
    from flamia import ops

    total, d = 96, 64
    cu = _cu([20, 44, 32], DEVICE)
    q, k, v, do = rand_qkvdo(total, 4, 2, d, seed=14, device=DEVICE)
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    plan = ops.batch_plan(cu, total, d, fp8=recipe != "bf16")
    op = ops.attention_fwd if recipe == "bf16" else ops.attention_fwd_fp8
    args = (q, k, v, plan.seg_start, plan.seg_end, plan.order_fwd, plan.order_dkdv,
            plan.order_dq, d**-0.5, recipe)
    o_op = op(*args)[0]
    grads_op = torch.autograd.grad(o_op, (q, k, v), do)
    o_eager = flamia.attention(q, k, v, cu, total, recipe=recipe, impl="triton")
    grads_eager = torch.autograd.grad(o_eager, (q, k, v), do)
    assert torch.equal(o_eager, o_op)
    for a, b in zip(grads_eager, grads_op):
        assert torch.equal(a, b)


def test_token_major_copy_triton(monkeypatch):
    from flamia.kernels.quantize import token_major_copy

    x8, _, _ = quantize_mx_token(torch.randn(100, 3, 64).bfloat16().to(DEVICE), transposed=False)
    monkeypatch.setenv("FLAMIA_FP8_TRANSPOSE", "torch")
    ref = token_major_copy(x8)
    assert ref.shape == (3, 64, 128) and torch.equal(ref[..., :100].float(),
                                                     x8.permute(1, 2, 0).float())
    monkeypatch.setenv("FLAMIA_FP8_TRANSPOSE", "triton")
    ours = token_major_copy(x8)
    assert ours.dtype == x8.dtype and ours.shape == ref.shape
    assert torch.equal(ours.float(), ref.float())
    monkeypatch.setenv("FLAMIA_FP8_TRANSPOSE", "fused_in_place")  # not a mode: a clear error
    with pytest.raises(ValueError, match="accepted"):
        token_major_copy(x8)


@pytest.mark.parametrize("nvfp4", [False, True])
def test_token_major_copies_of_two_tensors(nvfp4):
    """The backward's one launch for Q8's and K8's copies: each equals its own copy (GQA head
    counts, E4M3 bytes or NVFP4 values in bf16); mismatched inputs are refused."""
    from flamia.kernels.quantize import quantize_nvfp4_token, token_major_copies, token_major_copy

    quantize = quantize_nvfp4_token if nvfp4 else quantize_mx_token
    g = torch.Generator().manual_seed(3)
    q8 = quantize(torch.randn(90, 4, 64, generator=g).bfloat16().to(DEVICE), transposed=False)[0]
    k8 = quantize(torch.randn(90, 1, 64, generator=g).bfloat16().to(DEVICE), transposed=False)[0]
    qt, kt = token_major_copies(q8, k8)
    for ours, x in ((qt, q8), (kt, k8)):
        ref = token_major_copy(x)
        assert ours.dtype == ref.dtype and ours.shape == ref.shape
        assert torch.equal(ours.float(), ref.float())
        assert torch.equal(ours[..., :90].float(), x.permute(1, 2, 0).float())
    with pytest.raises(ValueError, match="one dtype"):
        token_major_copies(q8, k8[:50])


@TRANSPOSE_MODES
@pytest.mark.parametrize("qk_nvfp4,fp32_scale", [(False, False), (True, False), (False, True)])
def test_qkv_quantizer_matches_per_tensor_quantizers(qk_nvfp4, fp32_scale, transpose,
                                                      monkeypatch):
    """The forward's single launch over Q, K, V writes the bytes of the per-tensor quantizers,
    K's and V's scales as [Hkv, T, 2] rows (GQA: Hq != Hkv; T off the tile grid)."""
    from flamia.kernels.quantize import quantize_fp32_token, quantize_nvfp4_token, quantize_qkv

    monkeypatch.setenv("FLAMIA_FP8_TRANSPOSE", transpose)
    g = torch.Generator().manual_seed(2)
    mk = lambda h: (torch.randn(75, h, 64, generator=g) * torch.exp2(
        torch.randint(-20, 20, (75, h, 1), generator=g).float())).bfloat16().to(DEVICE)
    q, k, v = mk(4), mk(2), mk(2)
    q[3] = 0.0
    mx = quantize_fp32_token if fp32_scale else quantize_mx_token
    qk = quantize_nvfp4_token if qk_nvfp4 else mx
    q8, _, sq = qk(q, transposed=False)
    k8, _, sk = qk(k, transposed=False)
    v8, vt8, sv = mx(v)
    got = quantize_qkv(q, k, v, qk_nvfp4=qk_nvfp4, fp32_scale=fp32_scale)
    for name, a, b in zip(("q8", "sq", "k8", "v8", "vt8", "skv"), got,
                          (q8, sq, k8, v8, vt8, torch.stack((sk, sv), dim=-1))):
        assert a.dtype == b.dtype and a.shape == b.shape, name
        same = torch.equal(a.view(torch.uint8), b.view(torch.uint8)) if a.element_size() == 1 \
            else torch.equal(a, b)
        assert same, f"{name} differs from the per-tensor quantizer"


def test_fp8_ops_save_quantized_tensors_only():
    """The FP8 ops keep E4M3 data and per-token scales for the backward, not bf16 copies and not
    the token-major copies (made in the backward): 0.64x the bf16 op's bytes at 16 heads, D=128."""
    from bench.activation_memory import saved_bytes_per_token

    hq = hkv = 16
    d = 128
    bf16 = saved_bytes_per_token("bf16", hq, hkv, d)["bytes_per_token"]
    mxfp8 = saved_bytes_per_token("mxfp8", hq, hkv, d)["bytes_per_token"]
    assert bf16 == 2 * (2 * hq + 2 * hkv) * d + 4 * hq  # q, k, v, o in bf16; lse
    assert mxfp8 == 2 * hq * d + (hq + 2 * hkv) * d + 4 * (2 * hq + 2 * hkv)  # o; q8 k8 v8; scales, lse


@pytest.mark.parametrize("recipe", ["mxfp8", "nvfp4_fp8"])
def test_mx_block_scaled_mma_path(recipe, monkeypatch):
    """FLAMIA_FP8_MMA=mx (Blackwell's block-scaled MMA through tl.dot_scaled, the default there):
    the same bytes with E8M0 block scales; same recipe, so it matches the reference like the Hopper
    path, and the probes stay exactly 0. Speed unmeasured (no Blackwell GPU here)."""
    if DEVICE == "cuda" and torch.cuda.get_device_capability()[0] < 10:
        pytest.skip("the MX path is for Blackwell (triton only emulates tl.dot_scaled on Hopper); "
                    "bench/fp8_check.py reports it there")
    lengths, hq, hkv, d = CASES[DEVICE][0]
    cu = _cu(lengths, DEVICE)
    q, k, v, do = rand_qkvdo(sum(lengths), hq, hkv, d, seed=20, device=DEVICE)
    run = lambda: attention_forward_backward(lambda *a: _fp8(*a, recipe=recipe), q, k, v, do, cu)
    monkeypatch.setenv("FLAMIA_FP8_MMA", "fast")
    hopper = run()
    monkeypatch.setenv("FLAMIA_FP8_MMA", "mx")
    ours = run()
    ref = attention_forward_backward(flamia.reference_attention, q, k, v, do, cu, recipe=recipe)
    for name, a, b, h in zip("O dQ dK dV".split(), ours, ref, hopper):
        if DEVICE == "cpu":
            # Exact fp32 accumulation here: power-of-two scales commute exactly, so the MX path
            # is the Hopper path bit for bit (whose agreement with the reference is tested above).
            assert torch.equal(a, h), f"{name}: MX path differs from the Hopper path"
        else:
            rel = ((a.float() - b.float()).norm() / b.float().norm()).item()
            assert rel < TOL[DEVICE], f"{name}: relative difference {rel:.2e} to the reference"
    total = 192 if DEVICE == "cpu" else 2048
    cu = adversarial_cu_seqlens(total, device=DEVICE)
    q, k, v, do = rand_qkvdo(total, 4, 2, 64, seed=21, device=DEVICE)
    res = probe_attention(lambda *a: _fp8(*a, recipe=recipe), q, k, v, cu, do, max_targets=2)
    for r in res.values():
        assert r.n_compared > 0 and r.max_abs_delta == 0.0, str(r)



@pytest.mark.parametrize("recipe", ["mxfp8", "nvfp4_fp8", "fp8_rowwise"])
def test_backward_prep_kernel_is_quantizer_and_delta(recipe, poisoned):
    """The FP8 backward quantizes dO itself, in one kernel with delta and the per-query rows
    (attention._attn_bwd_prep8_kernel), when the caller passes bf16 dO only: the same dQ, dK, dV
    as with dO quantized by quantize_mx_token and delta from the delta kernel (CPU: the same
    bits, the same operations in the same order; GPU: delta's row sums may be reduced in
    another order, so a tolerance far below the recipe's own error). Every output written."""
    from flamia.kernels.quantize import quantize_fp32_token, quantize_qkv, token_major_copies

    lengths, hq, hkv, d = CASES[DEVICE][0]
    total = sum(lengths)
    cu = _cu(lengths, DEVICE)
    q, k, v, do = rand_qkvdo(total, hq, hkv, d, seed=22, device=DEVICE)
    plan = flamia.ops.batch_plan(cu, total, d, fp8=True)
    fp32_scale = recipe == "fp8_rowwise"
    q8, sq, k8, v8, vt8, skv = quantize_qkv(q, k, v, qk_nvfp4=recipe == "nvfp4_fp8",
                                            fp32_scale=fp32_scale)
    fp8 = {"sq": sq, "skv": skv, "vt": vt8, "qk_bf16": recipe == "nvfp4_fp8"}
    o, lse = K.attention_fwd(q8, k8, None, plan.seg_start, plan.order_fwd, d ** -0.5, fp8=fp8)
    qt8, kt8 = token_major_copies(q8, k8)
    fp8 = {"qt": qt8, "kt": kt8, "sq": sq, "skv": skv, "qk_bf16": recipe == "nvfp4_fp8",
           "fp32_scale": fp32_scale}
    do8, dot8, sdo = (quantize_fp32_token if fp32_scale else quantize_mx_token)(do)
    backward = lambda extra: K.attention_bwd(do, q8, k8, v8, o, lse, plan.seg_start,
                                             plan.seg_end, plan.order_dkdv, plan.order_dq,
                                             d ** -0.5, fp8={**fp8, **extra})
    separate = backward({"do8": do8, "dot": dot8, "sdo": sdo})
    fused = backward({})
    for name, a, b in zip("dQ dK dV".split(), fused, separate):
        assert torch.isfinite(a).all(), f"{name}: non-finite (unwritten?) elements"
        if DEVICE == "cpu":
            assert torch.equal(a, b), name
        else:
            rel = ((a.float() - b.float()).norm() / b.float().norm()).item()
            assert rel < 1e-3, f"{name}: {rel:.2e}"


def test_fp8_rowwise_refuses_the_block_scaled_mma(monkeypatch):
    """fp8_rowwise's fp32 scales are not E8M0: the MX MMA path would drop their mantissas, so
    the recipe says so instead of computing another function."""
    monkeypatch.setenv("FLAMIA_FP8_MMA", "mx")
    cu = _cu([40, 24], DEVICE)
    q, k, v, _ = rand_qkvdo(64, 2, 2, 64, seed=23, device=DEVICE)
    with pytest.raises(ValueError, match="fp8_rowwise.*FLAMIA_FP8_MMA=fast"):
        _fp8(q, k, v, cu, recipe="fp8_rowwise")


_NO_INREG_SCALES_SCRIPT = """
import warnings, torch, flamia
from flamia.kernels.quantize import INREG_ROW_SCALES
from conftest import rand_qkvdo
from test_kernels import _cu
cu = _cu([40, 24], "cpu")
q, k, v, do = rand_qkvdo(64, 2, 2, 64, seed=3, device="cpu")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    o = flamia.attention(q, k, v, cu, 64, recipe="mxfp8", impl="triton")
print("SCALES", bool(INREG_ROW_SCALES), "WARNED", any("UNSAFE" in str(w.message) for w in caught))
torch.save(o.float(), OUT)
"""


@pytest.mark.skipif(DEVICE != "cpu", reason="interpreter tier: the switch is read at import")
def test_no_inreg_scales_experiment_changes_the_kernels_and_warns(tmp_path):
    """FLAMIA_UNSAFE_NO_INREG_SCALES=1 (a timing experiment, kernels/quantize.py) must reach the
    kernels, or its timings would be the normal kernels'. In a fresh interpreter process with it
    set, the mxfp8 forward warns and its output differs from the default's (P' without its row
    scales underflows); without it, no warning and the reference recipe's output."""
    import os
    import subprocess
    import sys

    outs = {}
    for flag in ("0", "1"):
        out = tmp_path / f"o{flag}.pt"
        here = os.path.dirname(os.path.abspath(__file__))
        path = os.pathsep.join([here, os.path.dirname(here), os.environ.get("PYTHONPATH", "")])
        env = dict(os.environ, FLAMIA_UNSAFE_NO_INREG_SCALES=flag, TRITON_INTERPRET="1",
                   PYTHONPATH=path)
        proc = subprocess.run(
            [sys.executable, "-c", f"OUT = {str(out)!r}\n" + _NO_INREG_SCALES_SCRIPT],
            cwd=here, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        scales, warned = flag == "0", flag == "1"
        assert f"SCALES {scales} WARNED {warned}" in proc.stdout, proc.stdout
        outs[flag] = torch.load(out)
    q, k, v, _ = rand_qkvdo(64, 2, 2, 64, seed=3, device="cpu")
    ref = flamia.attention(q, k, v, _cu([40, 24], "cpu"), 64, recipe="mxfp8", impl="reference")
    assert (outs["0"] - ref.float()).norm() <= TOL["cpu"] * ref.float().norm()
    assert (outs["1"] - outs["0"]).norm() > 0.05 * outs["0"].norm()
