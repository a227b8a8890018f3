"""Attention recipes: which format each operand of the seven attention matmuls is in (DESIGN.md s4).

The seven matmuls: forward S = QK^T, O = PV; backward S (recomputed), dP = dO V^T, dV = P^T dO,
dQ = dS K, dK = dS^T Q.

A recipe is described by
- how the four input operands Q, K, V, dO are scaled (``input_scaling``):
    "bf16"         no quantization (bf16 values as given)
    "mx_token"     E4M3 data, one E8M0 scale per (token, head) over the head dimension
    "nvfp4_token"  E2M1 data, one UE4M3 scale per 16 elements along D, and one fp32 second-level
                   scale per (token, head) (not per tensor: a per-tensor amax would leak)
    "mx_seqblock"  E4M3 data, one E8M0 scale per 32 consecutive tokens per channel, blocks aligned
                   to the packed layout and blind to segment boundaries (LEAKY control)
    "tensorwise"   E4M3 data, one fp32 scale amax/448 per tensor (LEAKY control)
    "fp32_token"   E4M3 data, one fp32 scale amax/448 per (token, head): torchao's "rowwise"
                   float8 scaling; not an MX scale (not a power of two), so a token's largest
                   element maps to E4M3's 448 exactly instead of to (224, 448]
- how the in-register operands P', dS' and their transposes are rounded (``inreg``):
    "bf16"         rounded to bf16 (FlashAttention-2's choice)
    "fp32"         not rounded: a diagnostic variant (no kernel), e.g. to check the backward's
                   algebra against finite differences, which in-register rounding would defeat
    "e4m3"         E4M3 with one E8M0 scale per row per group of ``inreg_group`` columns, groups
                   aligned to the packed layout's grid, computed over visible entries only
                   (masked entries are exactly 0). A per-token scale of the other operand of the
                   matmul is folded in before quantization (P'_ij = P_ij sV_j, ...).
- ``dp_bf16``: compute dP = dO V^T from the bf16 dO and V (SageBwd keeps this matmul in 16 bits).

Kernels that implement an "e4m3" in-register recipe must use key tiles (forward, dQ) and query
tiles (dK/dV) of exactly ``inreg_group`` tokens aligned to multiples of it in the packed layout,
so that the scale groups are the same in the kernel and in the reference.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Recipe", "RECIPES", "SAFE_RECIPES", "LEAKY_RECIPES", "get_recipe"]

INPUT_SCALINGS = ("bf16", "mx_token", "nvfp4_token", "mx_seqblock", "tensorwise", "fp32_token")
INREG_FORMATS = ("bf16", "e4m3", "fp32")


@dataclass(frozen=True)
class Recipe:
    name: str
    q: str
    k: str
    v: str
    do: str
    inreg: str
    inreg_group: int = 64
    dp_bf16: bool = False
    leaky: bool = False
    description: str = ""

    def __post_init__(self):
        for field in ("q", "k", "v", "do"):
            if getattr(self, field) not in INPUT_SCALINGS:
                raise ValueError(
                    f"recipe {self.name!r}: {field} scaling {getattr(self, field)!r} is not one "
                    f"of {INPUT_SCALINGS}"
                )
        if self.inreg not in INREG_FORMATS:
            raise ValueError(f"recipe {self.name!r}: inreg {self.inreg!r} not in {INREG_FORMATS}")
        if self.inreg_group % 32:
            raise ValueError(
                f"recipe {self.name!r}: inreg_group must be a multiple of 32 (an MX block), "
                f"got {self.inreg_group}"
            )

    @property
    def is_fp8(self) -> bool:
        return self.inreg == "e4m3"


RECIPES: dict[str, Recipe] = {
    r.name: r
    for r in (
        Recipe(
            "bf16", "bf16", "bf16", "bf16", "bf16", inreg="bf16",
            description="bf16 operands, fp32 accumulation and softmax; the baseline",
        ),
        Recipe(
            "mxfp8", "mx_token", "mx_token", "mx_token", "mx_token", inreg="e4m3",
            description="FLAMIA MXFP8: per-(token, head) E8M0 scales, E4M3 data, in-register "
            "P'/dS' in E4M3 per row per 64-token group",
        ),
        Recipe(
            "nvfp4_fp8", "nvfp4_token", "nvfp4_token", "mx_token", "mx_token", inreg="e4m3",
            description="Q, K in NVFP4 with a per-token second-level scale; V, dO, P', dS' as in "
            "mxfp8",
        ),
        Recipe(
            "fp8_rowwise", "fp32_token", "fp32_token", "fp32_token", "fp32_token", inreg="e4m3",
            description="mxfp8 with fp32 per-(token, head) scales amax/448 instead of E8M0 ones "
            "(torchao's rowwise float8 scaling): what power-of-two scales cost; not MX",
        ),
        Recipe(
            "mxfp8_seqblock", "mx_token", "mx_token", "mx_seqblock", "mx_seqblock", inreg="e4m3",
            leaky=True,
            description="LEAKY CONTROL: V and dO scaled per 32 consecutive tokens per channel, "
            "across segment boundaries and from future tokens",
        ),
        Recipe(
            "fp8_tensorwise", "tensorwise", "tensorwise", "tensorwise", "tensorwise",
            inreg="e4m3", leaky=True,
            description="LEAKY CONTROL: one fp32 scale per tensor from its current amax",
        ),
    )
}
SAFE_RECIPES = tuple(n for n, r in RECIPES.items() if not r.leaky)
LEAKY_RECIPES = tuple(n for n, r in RECIPES.items() if r.leaky)


def get_recipe(recipe: str | Recipe) -> Recipe:
    if isinstance(recipe, Recipe):
        return recipe
    if not isinstance(recipe, str) or recipe not in RECIPES:
        raise ValueError(
            f"unknown recipe {recipe!r}; accepted: {', '.join(RECIPES)} "
            f"(safe: {', '.join(SAFE_RECIPES)}; leaky controls: {', '.join(LEAKY_RECIPES)})"
        )
    return RECIPES[recipe]
