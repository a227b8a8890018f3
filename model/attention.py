"""Attention backends of the Llama model, chosen by one config line (``flamia.attention``).

    bf16-reference     flamia.attention(recipe="bf16", impl="reference"): the pure-PyTorch oracle
    flamia-bf16        flamia.attention(recipe="bf16")
    flamia-mxfp8       flamia.attention(recipe="mxfp8")
    flamia-nvfp4_fp8   flamia.attention(recipe="nvfp4_fp8")
    flamia-fp8_rowwise flamia.attention(recipe="fp8_rowwise"): mxfp8 with fp32 per-token scales
    flamia-mxfp8_seqblock, flamia-fp8_tensorwise
                       the leaky control recipes: for the leakage probes only, never to train
    sdpa, flex, varlen torchtitan's own attention (outside baselines); sdpa is causal within a row
                       only (it does not separate packed documents), flex and varlen are
                       document-causal
The flamia backends run the Triton kernels where the recipe has one on CUDA (impl="auto") and
the reference implementation of the same recipe elsewhere (CPU runs).

This module knows nothing about torchtitan: it takes packed q, k, v and cu_seqlens.
"""

from __future__ import annotations

import torch

import flamia

FLAMIA_BACKENDS = {
    "bf16-reference": ("bf16", "reference"),
    "flamia-bf16": ("bf16", "auto"),
    "flamia-mxfp8": ("mxfp8", "auto"),
    "flamia-nvfp4_fp8": ("nvfp4_fp8", "auto"),
    "flamia-fp8_rowwise": ("fp8_rowwise", "auto"),
    "flamia-mxfp8_seqblock": ("mxfp8_seqblock", "auto"),
    "flamia-fp8_tensorwise": ("fp8_tensorwise", "auto"),
}
TORCHTITAN_BACKENDS = ("sdpa", "flex", "varlen")
BACKENDS = tuple(FLAMIA_BACKENDS) + TORCHTITAN_BACKENDS
LEAKY_BACKENDS = ("flamia-mxfp8_seqblock", "flamia-fp8_tensorwise", "sdpa")


def check_backend(backend: str, head_dim: int) -> None:
    """One clear sentence for a backend or head dim this model cannot run."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown attention backend {backend!r}; accepted: {', '.join(BACKENDS)}")
    if backend in FLAMIA_BACKENDS and head_dim not in flamia.SUPPORTED_HEAD_DIMS:
        raise ValueError(
            f"attention backend {backend!r} supports head dims {flamia.SUPPORTED_HEAD_DIMS}, but "
            f"the model has head dim {head_dim} (dim / n_heads)"
        )


class PackedDocumentAttention(torch.nn.Module):
    """Document-causal attention over packed rows through ``flamia.attention``.

    forward(q_THD, k_THD, v_THD, cu_seqlens, max_seqlen) -> o_THD in q's dtype. The operands go
    to the kernel in bf16 (the dtype of GPU training); a CPU run in fp32 is cast at this edge.
    """

    def __init__(self, backend: str):
        super().__init__()
        self.backend = backend
        self.recipe, self.impl = FLAMIA_BACKENDS[backend]
        self.record = False  # when set, the next call keeps its inputs (attention statistics)
        self.recorded = None

    def forward(self, q, k, v, cu_seqlens, max_seqlen):
        bf = lambda t: t.to(torch.bfloat16).contiguous()
        q, k, v, dtype = bf(q), bf(k), bf(v), q.dtype
        if self.record:
            self.recorded = (q.detach(), k.detach(), v.detach(), cu_seqlens, int(max_seqlen))
            self.record = False
        o = flamia.attention(q, k, v, cu_seqlens, int(max_seqlen), recipe=self.recipe,
                             impl=self.impl)
        return o.to(dtype)

    def extra_repr(self) -> str:
        return f"backend={self.backend}, recipe={self.recipe}, impl={self.impl}"
