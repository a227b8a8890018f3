"""Triton-backed attention ops (torch.library custom ops); filled in by the kernel work."""

TRITON_RECIPES: tuple[str, ...] = ()


def triton_attention(q, k, v, cu_seqlens, max_seqlen, recipe, softmax_scale):
    raise ValueError(f"no Triton kernel for recipe {recipe!r} yet")
