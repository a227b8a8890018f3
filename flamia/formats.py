"""Low-precision number formats in pure PyTorch: the numerics contract of DESIGN.md section 3.

Every quantizer here returns *values* (a float32 tensor holding numbers exactly representable
in the target format), not packed bytes: the reference, the probes and the tests compare values,
and a kernel's bytes are checked by decoding them to the same values.

Element formats (OCP MX v1.0 / NVIDIA NVFP4):

    name   exponent bits  mantissa bits  min normal exp  max normal
    E4M3   4              3              -6              448      (fp8 e4m3fn: no inf, one NaN)
    E5M2   5              2              -14             57344
    E2M1   2              1              0               6        (fp4)
    UE4M3  unsigned E4M3, used as the NVFP4 block scale

Scale formats:

    E8M0   2^e, e in [-127, 127]; the MX block scale. The scale of a block with absolute maximum
           a is 2^ceil(log2(a / max_elem)), computed exactly from the bits of a (never from a
           rounded log2), so a / scale <= max_elem always: scaling never saturates.
           An all-zero block gets scale 1. A block holding NaN or +-inf gets a NaN scale
           (E8M0's NaN encoding 0xFF), so the whole block dequantizes to NaN: a non-finite value
           is never turned into a finite one.

Element rounding: clamp to +-max_normal first (explicit saturation: torch's CPU cast saturates
e4m3fn but sends e5m2 to inf, and back ends differ), then round to nearest, ties to even, with
gradual underflow into the subnormals. NaN stays NaN (the clamp keeps it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

__all__ = [
    "ElementFormat",
    "E4M3",
    "E5M2",
    "E2M1",
    "UE4M3",
    "ELEMENT_FORMATS",
    "round_to_format",
    "e8m0_exponent",
    "e8m0_scale",
    "quantize_mx",
    "quantize_e4m3_rows",
]


@dataclass(frozen=True)
class ElementFormat:
    """A small floating-point element format with saturating round-to-nearest-even."""

    name: str
    mantissa_bits: int
    min_normal_exp: int  # exponent of the smallest normal number
    max_normal: float
    signed: bool = True
    torch_dtype: torch.dtype | None = None  # storage dtype where torch has one

    @property
    def max_exp(self) -> int:
        """Exponent of max_normal (max_normal = m * 2^max_exp with m in [1, 2))."""
        return math.frexp(self.max_normal)[1] - 1

    @property
    def max_mantissa(self) -> float:
        """max_normal / 2^max_exp, in [1, 2): 1.75 for E4M3, 1.5 for E2M1."""
        return self.max_normal / 2.0**self.max_exp

    @property
    def min_subnormal(self) -> float:
        return 2.0 ** (self.min_normal_exp - self.mantissa_bits)


E4M3 = ElementFormat("e4m3", 3, -6, 448.0, torch_dtype=torch.float8_e4m3fn)
E5M2 = ElementFormat("e5m2", 2, -14, 57344.0, torch_dtype=torch.float8_e5m2)
E2M1 = ElementFormat("e2m1", 1, 0, 6.0)
UE4M3 = ElementFormat("ue4m3", 3, -6, 448.0, signed=False, torch_dtype=torch.float8_e4m3fn)
ELEMENT_FORMATS = {f.name: f for f in (E4M3, E5M2, E2M1, UE4M3)}

E8M0_MIN_EXP = -127
E8M0_MAX_EXP = 127


def round_to_format(x: torch.Tensor, fmt: ElementFormat) -> torch.Tensor:
    """Saturating round-to-nearest-even of ``x`` to ``fmt``; returns float32 values.

    Unsigned formats (UE4M3) clamp negative inputs to 0. NaN stays NaN.
    """
    x = x.to(torch.float32)
    lo = 0.0 if not fmt.signed else -fmt.max_normal
    x = torch.clamp(x, lo, fmt.max_normal)  # explicit saturation; clamp keeps NaN
    # Exponent of each value's leading bit, but never below the smallest normal exponent: below it
    # the spacing stays that of the subnormals (gradual underflow).
    _, e = torch.frexp(x)  # x = m * 2^e, m in [0.5, 1)
    e = torch.clamp(e - 1, min=fmt.min_normal_exp)
    quantum = torch.ldexp(torch.ones_like(x), e - fmt.mantissa_bits)
    # x / quantum and the product back are exact (powers of two, far from fp32's limits);
    # torch.round rounds half to even.
    return torch.round(x / quantum) * quantum


def e8m0_exponent(amax: torch.Tensor, fmt: ElementFormat) -> torch.Tensor:
    """The E8M0 exponent ceil(log2(amax / fmt.max_normal)) computed exactly; int32.

    amax must be >= 0. amax == 0 gives exponent 0 (scale 1). Non-finite amax gives exponent
    E8M0_MAX_EXP + 1, which ``e8m0_scale`` maps to NaN.
    """
    amax = amax.to(torch.float32)
    m, e = torch.frexp(amax)  # amax = m * 2^e, m in [0.5, 1)
    # amax / max = (2m / max_mantissa) * 2^(e - 1 - max_exp); 2m in [1, 2).
    # ceil(log2(2m / max_mantissa)) is 0 when 2m <= max_mantissa, else 1.
    exp = (e - 1 - fmt.max_exp) + (2 * m > fmt.max_mantissa).to(torch.int32)
    exp = torch.clamp(exp, E8M0_MIN_EXP, E8M0_MAX_EXP).to(torch.int32)
    exp = torch.where(amax == 0, torch.zeros_like(exp), exp)
    return torch.where(torch.isfinite(amax), exp, torch.full_like(exp, E8M0_MAX_EXP + 1))


def e8m0_scale(exponent: torch.Tensor) -> torch.Tensor:
    """2^exponent as float32; an exponent outside [-127, 127] is E8M0's NaN."""
    s = torch.ldexp(torch.ones_like(exponent, dtype=torch.float32), exponent.to(torch.int32))
    bad = (exponent < E8M0_MIN_EXP) | (exponent > E8M0_MAX_EXP)
    return torch.where(bad, torch.full_like(s, float("nan")), s)


def quantize_mx(
    x: torch.Tensor, fmt: ElementFormat, block_dim: int, block_size: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """MX quantization with E8M0 scales over blocks along ``block_dim``.

    ``block_size=None`` makes the whole dimension one block (the FLAMIA per-token scale, valid as
    an MX scale for every 32-element block of that dimension). Blocks start at index 0 of the
    dimension; a short last block is allowed. Returns ``(data, scale)``: ``data`` float32 values
    of ``fmt``, ``scale`` float32 powers of two with ``block_dim`` of size n_blocks;
    ``data * scale`` (broadcast per block) is the dequantized tensor.
    """
    x = x.to(torch.float32)
    dim = block_dim % x.dim()
    n = x.shape[dim]
    bs = n if block_size is None else block_size
    n_blocks = -(-n // bs)
    pad = n_blocks * bs - n
    xm = x.movedim(dim, -1)
    if pad:
        xm = torch.nn.functional.pad(xm, (0, pad))
    xb = xm.reshape(*xm.shape[:-1], n_blocks, bs)
    amax = xb.abs().amax(dim=-1, keepdim=True)
    scale = e8m0_scale(e8m0_exponent(amax, fmt))
    data = round_to_format(xb / scale, fmt)
    data = data.reshape(*xm.shape[:-1], n_blocks * bs)[..., :n].movedim(-1, dim)
    return data, scale.squeeze(-1).movedim(-1, dim)


def quantize_e4m3_rows(x: torch.Tensor, group: int) -> torch.Tensor:
    """Quantize-dequantize a 2-D (or batched) matrix per row over column groups of ``group``.

    This is the in-register operand quantization of the FP8 recipes (P', dS', and their
    transposes): E4M3 data with one E8M0 scale per row per group of ``group`` consecutive columns,
    groups aligned to column 0. Masked entries must already be exactly 0 so that they do not
    enter a scale. Returns the dequantized float32 values.
    """
    data, scale = quantize_mx(x, E4M3, block_dim=-1, block_size=group)
    return data * scale.repeat_interleave(group, dim=-1)[..., : x.shape[-1]]
