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
@pytest.mark.parametrize("lengths,hq,hkv,d", CPU_CASES)
def test_bf16_kernel_flash_attention_rule_interpreter(lengths, hq, hkv, d, poisoned):
    if DEVICE == "cuda":
        pytest.skip("interpreter tier; the gpu tier covers this on CUDA")
    _check_flash_attention_rule(lengths, hq, hkv, d, "cpu")


@pytest.mark.gpu
@pytest.mark.parametrize("lengths,hq,hkv,d", GPU_CASES)
def test_bf16_kernel_flash_attention_rule_gpu(lengths, hq, hkv, d, poisoned):
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


def test_bf16_kernel_does_not_leak():
    total = 192 if DEVICE == "cpu" else 2048
    cu = adversarial_cu_seqlens(total, device=DEVICE)
    q, k, v, do = rand_qkvdo(total, HQ, 2, 64, seed=4, device=DEVICE)
    res = probe_attention(_triton, q, k, v, cu, do, max_targets=3)
    for r in res.values():
        assert r.n_compared > 0
        assert r.max_abs_delta == 0.0, str(r)


def test_batch_plan_orders_longest_first():
    from flamia.ops import batch_plan

    cu = _cu([1, 7, 129, 63, 100], DEVICE)
    plan = batch_plan(cu, 300, 64)
    for order in (plan.order_fwd, plan.order_dkdv, plan.order_dq):
        assert sorted(order.tolist()) == list(range(order.numel()))
    seg_start = plan.seg_start.tolist()
    assert seg_start[0] == 0 and seg_start[8] == 8 and seg_start[299] == 200
    assert plan.seg_end.tolist()[8] == 137


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
