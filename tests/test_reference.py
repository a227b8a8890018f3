"""The pure-PyTorch oracle: exact path against autograd of a naive softmax attention, the bf16
recipe against the FlashAttention rule, the FP8 recipes against their floors."""

import pytest
import torch

from flamia.reference import (
    attention_forward_backward, document_causal_mask, exact_attention, quantize_operand,
    reference_attention, segment_ids,
)
from flamia.report import accuracy_checks, accuracy_rows

from conftest import rand_qkvdo

CU = [0, 1, 8, 137, 200, 201, 300]  # lengths 1, 7, 129, 63, 1, 99: off every tile grid


def naive_attention(q, k, v, cu, scale=None):
    total, hq, d = q.shape
    g = hq // k.shape[1]
    scale = scale or d**-0.5
    mask = document_causal_mask(cu, total)
    s = torch.einsum("thd,shd->hts", q, k.repeat_interleave(g, 1)) * scale
    p = s.masked_fill(~mask, float("-inf")).softmax(-1)
    return torch.einsum("hts,shd->thd", p, v.repeat_interleave(g, 1))


def test_segment_ids_and_mask():
    cu = torch.tensor([0, 2, 5], dtype=torch.int32)
    assert segment_ids(cu, 5).tolist() == [0, 0, 1, 1, 1]
    m = document_causal_mask(cu, 5)
    assert m[1, 0] and not m[2, 1] and not m[0, 1] and m[4, 2]


@pytest.mark.parametrize("hq,hkv", [(4, 4), (4, 2), (4, 1)])
def test_exact_matches_autograd_of_naive(hq, hkv):
    cu = torch.tensor(CU, dtype=torch.int32)
    q, k, v, do = (t.double() for t in rand_qkvdo(300, hq, hkv, 64, device="cpu"))
    ours = attention_forward_backward(exact_attention, q, k, v, do, cu)
    ref = attention_forward_backward(naive_attention, q, k, v, do, cu)
    for a, b in zip(ours, ref):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_exact_gradcheck():
    cu = torch.tensor([0, 3, 8], dtype=torch.int32)
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(8, 2, 4, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(3))
    assert torch.autograd.gradcheck(lambda a, b, c: exact_attention(a, b, c, cu), (q, k, v))


@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("hq,hkv", [(4, 4), (4, 2)])
def test_bf16_recipe_meets_flash_attention_rule(d, hq, hkv):
    cu = torch.tensor(CU, dtype=torch.int32)
    q, k, v, do = rand_qkvdo(300, hq, hkv, d, seed=1, device="cpu")
    ref = attention_forward_backward(exact_attention, q, k, v, do.double(), cu)
    torch_bf16 = attention_forward_backward(naive_attention, q, k, v, do, cu)
    ours = attention_forward_backward(reference_attention, q, k, v, do, cu, recipe="bf16")
    for name, a, b, r in zip("O dQ dK dV".split(), ours, torch_bf16, ref):
        err = (a.double() - r).abs().max().item()
        base = (b.double() - r).abs().max().item()
        assert err <= 2 * base + 1e-5, f"{name}: {err} > 2 * {base} + 1e-5"


def test_quantize_operand_mx_token_is_per_token():
    q, *_ = rand_qkvdo(10, 2, 2, 64, device="cpu")
    q = q.float()
    q[3] *= 1000.0
    data, scale = quantize_operand(q, "mx_token")
    assert scale.shape == (10, 2)
    assert torch.all(data.abs() <= 448)
    # each token's scale depends on that token only
    d2, s2 = quantize_operand(q[:3], "mx_token")
    assert torch.equal(d2, data[:3]) and torch.equal(s2, scale[:3])


def test_quantize_operand_fp32_token_maps_each_token_amax_to_448():
    q, *_ = rand_qkvdo(10, 2, 2, 64, device="cpu")
    q = q.float()
    q[3] *= 1000.0
    q[5, 1] = 0.0
    data, scale = quantize_operand(q, "fp32_token")
    amax = q.abs().amax(-1)
    assert torch.equal(data.abs().amax(-1)[amax > 0], torch.full_like(amax[amax > 0], 448.0))
    assert scale[5, 1] == 1 and torch.all(data[5, 1] == 0)
    # the largest element of each token survives to fp32 rounding (E8M0: up to 2^-4 off)
    deq = data * scale[..., None]
    torch.testing.assert_close(deq.abs().amax(-1), amax, rtol=2**-23, atol=0)
    d2, s2 = quantize_operand(q[:3], "fp32_token")  # per token: no other token enters
    assert torch.equal(d2, data[:3]) and torch.equal(s2, scale[:3])


def test_power_of_two_scales_round_alike_per_token_and_per_tensor():
    """DESIGN s6: power-of-two scales do not change E4M3 rounding, so one E8M0 scale per token
    and one per tensor give the same dequantized value to every element that both put in E4M3's
    normal range (the elements that one of them sends to subnormals are where they differ)."""
    from flamia.formats import E4M3, round_to_format

    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 2, 128, generator=g) * torch.exp2(
        torch.randint(-3, 4, (64, 1, 1), generator=g).float())
    data, scale = quantize_operand(x, "mx_token")
    s = torch.exp2(torch.ceil(torch.log2(x.abs().amax() / 448.0)))
    tensorwise = round_to_format(x / s, E4M3) * s
    min_normal = 2.0**-6
    normal = (x.abs() / s >= min_normal) & (x.abs() / scale[..., None] >= min_normal)
    assert normal.float().mean() > 0.99
    assert torch.equal((data * scale[..., None])[normal], tensorwise[normal])
    # a scale that is not a power of two rounds differently: the check above can fail
    other = round_to_format(x / (0.75 * s), E4M3) * (0.75 * s)
    assert not torch.equal(other[normal], tensorwise[normal])


def test_e8m0_scales_cost_accuracy_on_outliers(accuracy_table):
    """What mxfp8's power-of-two scales cost: on FlashAttention-3's outlier inputs, fp8_rowwise
    (the same recipe with fp32 per-token scales amax/448) is more accurate on every tensor, since
    an outlier token's largest element is exact there and up to 2^-4 off under E8M0 (measured
    on seeds 0-2 at T=512: O 5.3-5.4% vs 6.4-7.3%; at T=256, with fewer outliers, dV gains only
    3%). On standard-normal inputs the two are alike."""
    rows = {r["recipe"]: r for r in accuracy_table if r["input"] == "outliers"}
    for t in ("O", "dQ", "dK", "dV"):
        assert rows["fp8_rowwise"][t] < 0.95 * rows["mxfp8"][t], (t, rows["fp8_rowwise"][t],
                                                                 rows["mxfp8"][t])
        assert rows["fp8_rowwise floor"][t] < rows["mxfp8 floor"][t], t


def test_nvfp4_values_are_bf16_exact():
    q, *_ = rand_qkvdo(16, 2, 2, 128, device="cpu")
    data, scale = quantize_operand(q, "nvfp4_token")
    assert torch.equal(data.to(torch.bfloat16).float(), data)


@pytest.fixture(scope="module")
def accuracy_table():
    """flamia.report's accuracy rows at its defaults (T=512, H=2, D=128, seed 0)."""
    return accuracy_rows("reference", total=512, hq=2, hkv=2, d=128)


def test_fp8_recipes_within_floor_and_tensorwise(accuracy_table):
    # One seed's table. Over seeds 0-7 (`python -m flamia.report --seeds 0-7`) the 1.1x
    # fp8_tensorwise check fails on outlier inputs at some seeds (README, Accuracy).
    rows = accuracy_table
    failed = [text for text, ok in accuracy_checks(rows) if not ok]
    assert not failed, failed
    by = {(r["input"], r["recipe"]): r for r in rows}
    # bf16 inputs: the bf16 recipe's error is bf16-level, far under the FP8 floor
    assert by[("normal", "bf16")]["O"] < 5e-3


def test_seed_summary_counts_each_seed_against_its_own_bounds(accuracy_table):
    """--seeds: a check passes only if it passes on every seed's table, and the summary names the
    worst seed. Seed 7 is seed 0's table with mxfp8's dV on outlier inputs raised past 1.1x
    fp8_tensorwise (but not past 1.5x its floor): exactly that one check must fail, on seed 7."""
    import copy

    from flamia.report import main, seed_summary, _seed_range

    bad = copy.deepcopy(accuracy_table)
    by = {(r["input"], r["recipe"]): r for r in bad}
    by[("outliers", "mxfp8")]["dV"] = 1.12 * by[("outliers", "fp8_tensorwise")]["dV"]
    assert by[("outliers", "mxfp8")]["dV"] <= 1.5 * by[("outliers", "mxfp8 floor")]["dV"]
    summary = seed_summary({0: accuracy_table, 7: bad})
    failed = {k: c for k, c in summary["checks"].items() if c["passed"] < c["seeds"]}
    assert list(failed) == ["outliers dV mxfp8 <= 1.1x fp8_tensorwise"]
    assert failed["outliers dV mxfp8 <= 1.1x fp8_tensorwise"]["worst_seed"] == 7
    assert abs(failed["outliers dV mxfp8 <= 1.1x fp8_tensorwise"]["worst"] - 1.12 / 1.1) < 1e-12
    row = next(r for r in summary["vs_tensorwise"]
               if (r["input"], r["recipe"], r["tensor"]) == ("outliers", "mxfp8", "dV"))
    assert row["above"] >= 1 and abs(row["max"] - 1.12) < 1e-12 and row["seeds"] == 2
    assert _seed_range("0-7") == list(range(8)) and _seed_range("3") == [3]
    with pytest.raises(SystemExit):
        main(["--seeds", "7-0"])


def _central_differences(loss, inputs, eps=1e-6):
    grads = []
    for x in inputs:
        g = torch.zeros_like(x)
        for i in range(x.numel()):
            orig = x.view(-1)[i].item()
            x.view(-1)[i] = orig + eps
            up = loss(*inputs).item()
            x.view(-1)[i] = orig - eps
            down = loss(*inputs).item()
            x.view(-1)[i] = orig
            g.view(-1)[i] = (up - down) / (2 * eps)
        grads.append(g)
    return grads


def test_fp8_backward_is_the_gradient_of_its_forward():
    """DESIGN s4: the FP8 backward is the gradient of the function the forward computes. With the
    in-register rounding switched off (inreg="fp32": rounding P', dS' has no derivative), the
    mxfp8 recipe's seven-matmul backward (per-token scales factored out of S, folded into dS and
    P; delta from the quantized dO') matches central finite differences, in float64, of
    <O(Q', K', V'), dO'> with O exact attention of the dequantized operands (the quantizers pass
    gradients straight through). Catches a wrong scale fold or a delta from another dO (3% off)."""
    import dataclasses

    from flamia.recipes import get_recipe
    from flamia.reference import quantize_operand, reference_attention

    rec = dataclasses.replace(get_recipe("mxfp8"), name="mxfp8-fp32-inreg", inreg="fp32")
    cu = torch.tensor([0, 3, 8], dtype=torch.int32)
    g = torch.Generator().manual_seed(3)
    mk = lambda h: torch.randn(8, h, 8, generator=g) * torch.exp2(
        torch.randint(-3, 4, (8, h, 1), generator=g).float())  # per-token scales that differ
    q, k, v, do = mk(2), mk(1), mk(1), mk(2)
    _, dq, dk, dv = attention_forward_backward(reference_attention, q, k, v, do, cu, recipe=rec)

    def dequantized(x):
        data, scale = quantize_operand(x, "mx_token")
        return (data * scale[..., None]).double()

    qd, kd, vd, dod = (dequantized(t) for t in (q, k, v, do))
    fd = _central_differences(lambda a, b, c: (exact_attention(a, b, c, cu) * dod).sum(),
                              [qd, kd, vd])
    for name, got, want in zip(("dQ", "dK", "dV"), (dq, dk, dv), fd):
        torch.testing.assert_close(got.double(), want, rtol=1e-4, atol=1e-5 * want.abs().max(),
                                   msg=lambda m: f"{name}: {m}")
