"""FLAMIA: FLAsh MIcroscaling Attention for causal training on packed documents.

Public API:
    flamia.attention(q, k, v, cu_seqlens, max_seqlen, *, recipe="mxfp8", softmax_scale=None,
                     impl="auto")
    flamia.RECIPES: the recipes (DESIGN.md s4); flamia.reference: the pure-PyTorch oracle;
    flamia.probes: causal-leakage probes; python -m flamia.report: accuracy table.
"""

from .interface import SUPPORTED_HEAD_DIMS, attention
from .recipes import LEAKY_RECIPES, RECIPES, SAFE_RECIPES, Recipe, get_recipe
from .reference import exact_attention, reference_attention

__all__ = [
    "attention",
    "reference_attention",
    "exact_attention",
    "RECIPES",
    "SAFE_RECIPES",
    "LEAKY_RECIPES",
    "Recipe",
    "get_recipe",
    "SUPPORTED_HEAD_DIMS",
]
