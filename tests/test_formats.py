"""Element and scale formats: edge-value tables and agreement with torch's fp8 casts."""

import math

import pytest
import torch

from flamia.formats import (
    E2M1, E4M3, E5M2, UE4M3, e8m0_exponent, e8m0_scale, quantize_e4m3_rows, quantize_mx,
    round_to_format,
)

NAN = float("nan")

# (format, input, expected) — zero, subnormals, ties to even, max, just over max, overflow, NaN.
EDGE_TABLE = [
    (E4M3, 0.0, 0.0),
    (E4M3, -0.0, 0.0),
    (E4M3, 2.0**-9, 2.0**-9),  # smallest subnormal
    (E4M3, 2.0**-10, 0.0),  # half the smallest subnormal: tie to even -> 0
    (E4M3, 1.5 * 2.0**-10, 2.0**-9),
    (E4M3, 3 * 2.0**-10, 2.0**-8),  # tie between 1 and 2 subnormal quanta -> even (2)
    (E4M3, 2.0**-6, 2.0**-6),  # smallest normal
    (E4M3, 1.0625, 1.0),  # tie between 1 and 1.125 -> even mantissa (1.0)
    (E4M3, 1.1875, 1.25),  # tie between 1.125 and 1.25 -> 1.25
    (E4M3, 448.0, 448.0),
    (E4M3, 464.0, 448.0),  # just over max saturates
    (E4M3, 1e9, 448.0),
    (E4M3, -1e9, -448.0),
    (E4M3, float("inf"), 448.0),  # explicit saturation policy: clamp before the cast
    (E5M2, 57344.0, 57344.0),
    (E5M2, 61440.0, 57344.0),
    (E5M2, 1e9, 57344.0),  # torch's cast would give inf here
    (E5M2, 2.0**-16, 2.0**-16),  # smallest subnormal
    (E5M2, 2.0**-17, 0.0),
    (E2M1, 0.25, 0.0),  # tie -> 0
    (E2M1, 0.75, 1.0),  # tie between 0.5 and 1.0 -> 1.0 (even)
    (E2M1, 1.25, 1.0),
    (E2M1, 2.5, 2.0),
    (E2M1, 3.5, 4.0),
    (E2M1, 5.0, 4.0),  # tie between 4 and 6 -> 4
    (E2M1, 7.0, 6.0),
    (E2M1, -6.5, -6.0),
    (UE4M3, -1.0, 0.0),  # unsigned: negatives clamp to 0
    (UE4M3, 448.0, 448.0),
]


@pytest.mark.parametrize("fmt,x,expected", EDGE_TABLE)
def test_round_edge_values(fmt, x, expected):
    got = round_to_format(torch.tensor([x]), fmt).item()
    assert got == expected, f"{fmt.name}({x}) = {got}, expected {expected}"


@pytest.mark.parametrize("fmt", [E4M3, E5M2, E2M1])
def test_nan_stays_nan(fmt):
    assert math.isnan(round_to_format(torch.tensor([NAN]), fmt).item())


@pytest.mark.parametrize("fmt", [E4M3, E5M2])
def test_matches_torch_cast_after_clamp(fmt):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(200_000, generator=g) * torch.exp2(torch.randint(-24, 20, (200_000,), generator=g).float())
    ours = round_to_format(x, fmt)
    theirs = x.clamp(-fmt.max_normal, fmt.max_normal).to(fmt.torch_dtype).float()
    assert torch.equal(ours, theirs)


def test_e2m1_values_are_the_fp4_grid():
    x = torch.linspace(-8, 8, 4001)
    vals = set(round_to_format(x, E2M1).abs().unique().tolist())
    assert vals == {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0}


E8M0_TABLE = [
    (0.0, 0),  # all-zero block: scale 1
    (448.0, 0),
    (448.00003, 1),  # one ulp over max needs the next power of two
    (449.0, 1),
    (896.0, 1),
    (3.0, -7),  # 3/448 = 2^-7.22 -> ceil -7
    (1.75, -8),  # exactly 448 * 2^-8
    (1e-30, -108),
    (1e-45, -127),  # clamped to E8M0's range
    (3e38, 120),
]


@pytest.mark.parametrize("amax,exp", E8M0_TABLE)
def test_e8m0_exponent_table(amax, exp):
    assert e8m0_exponent(torch.tensor([amax]), E4M3).item() == exp


def test_e8m0_never_saturates_and_is_tight():
    g = torch.Generator().manual_seed(1)
    a = torch.rand(100_000, generator=g) * torch.exp2(torch.randint(-60, 60, (100_000,), generator=g).float())
    s = e8m0_scale(e8m0_exponent(a, E4M3))
    assert torch.all(a / s <= 448.0)
    assert torch.all(a / s > 224.0)  # one power of two less would saturate: the rule is tight


def test_e8m0_nonfinite_block_is_nan():
    s = e8m0_scale(e8m0_exponent(torch.tensor([float("inf"), NAN]), E4M3))
    assert torch.isnan(s).all()
    data, scale = quantize_mx(torch.tensor([[1.0, float("inf"), 2.0, 3.0]]), E4M3, block_dim=-1)
    assert torch.isnan(data * scale).all(), "a block with inf must not dequantize to finite values"


def test_quantize_mx_blocks_and_error():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(7, 100, generator=g)
    data, scale = quantize_mx(x, E4M3, block_dim=-1, block_size=32)
    assert scale.shape == (7, 4)
    deq = data * scale.repeat_interleave(32, -1)[:, :100]
    rel = (deq - x).abs() / x.abs().clamp_min(1e-30)
    assert rel[x.abs() > 0.5].max() <= 2.0**-4 + 1e-7  # half an E4M3 ulp at most
    assert torch.all(data.abs() <= 448.0)


def test_quantize_rows_scale_is_per_group():
    """A large entry changes its own group's scale and no other group's (masked entries, which
    are exactly 0, therefore never enter a scale)."""
    g = torch.Generator().manual_seed(3)
    x = torch.rand(2, 128, generator=g) * 0.01
    x[1] = x[0]
    x[1, 100] = 1000.0  # group 1 of row 1
    a = quantize_e4m3_rows(x, 64)
    assert torch.equal(a[0, :64], a[1, :64])
    x[1, 40] = 1000.0  # now group 0 of row 1 too: its small entries lose precision
    b = quantize_e4m3_rows(x, 64)
    assert not torch.equal(b[0, :40], b[1, :40])
