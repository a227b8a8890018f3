"""Leakage probes: exactly 0 for the safe recipes, non-zero for the leaky controls (a probe
that cannot fail proves nothing), at kernel level and model level."""

import pytest
import torch

import flamia
from flamia.probes import (
    adversarial_cu_seqlens, model_causal_probe, model_cross_document_probe, probe_attention,
)

from conftest import rand_qkvdo

T = 320


@pytest.fixture(scope="module")
def inputs():
    q, k, v, do = rand_qkvdo(T, 4, 2, 64, seed=5, device="cpu")
    return q, k, v, do, adversarial_cu_seqlens(T)


def test_adversarial_boundaries_are_off_grid():
    cu = adversarial_cu_seqlens(T).tolist()
    assert cu[0] == 0 and cu[-1] == T
    assert {1, 31, 33, 63, 65}.issubset(cu)
    lengths = [b - a for a, b in zip(cu[:-1], cu[1:])]
    assert 1 in lengths and 129 in lengths and all(n > 0 for n in lengths)


def _attn(recipe):
    return lambda q, k, v, cu: flamia.attention(q, k, v, cu, T, recipe=recipe, impl="reference")


@pytest.mark.parametrize("recipe", flamia.SAFE_RECIPES)
def test_safe_recipes_do_not_leak(inputs, recipe):
    q, k, v, do, cu = inputs
    res = probe_attention(_attn(recipe), q, k, v, cu, do)
    for r in res.values():
        assert r.n_compared > 0
        assert r.max_abs_delta == 0.0, str(r)


@pytest.mark.parametrize("recipe", flamia.LEAKY_RECIPES)
def test_leaky_controls_are_caught(inputs, recipe):
    q, k, v, do, cu = inputs
    res = probe_attention(_attn(recipe), q, k, v, cu, do)
    assert res["causal"].max_abs_delta > 0, str(res["causal"])
    assert res["cross_document"].max_abs_delta > 0, str(res["cross_document"])
    assert res["gradient_causal"].max_abs_delta > 0, str(res["gradient_causal"])


LOUD = 49


class TinyLM(torch.nn.Module):
    """Embedding -> one attention layer over documents delimited by BOS -> logits."""

    def __init__(self, vocab=50, d=128, heads=2, recipe="mxfp8", bos=0):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.emb = torch.nn.Parameter(torch.randn(vocab, d, generator=g))
        self.wqkv = torch.nn.Parameter(torch.randn(d, 3 * d, generator=g) / d**0.5)
        self.out = torch.nn.Parameter(torch.randn(d, vocab, generator=g) / d**0.5)
        with torch.no_grad():
            self.emb[LOUD] *= 100.0  # an outlier token: what a per-tensor amax reacts to
        self.heads, self.recipe, self.bos = heads, recipe, bos

    def forward(self, tokens):
        b, l = tokens.shape
        flat = tokens.reshape(-1)
        starts = (flat == self.bos).clone()
        starts[:: l] = True  # every row starts a new segment
        cu = torch.cat([starts.nonzero()[:, 0], torch.tensor([b * l])]).to(torch.int32)
        x = self.emb[flat]
        q, k, v = (x @ self.wqkv).bfloat16().reshape(b * l, 3, self.heads, -1).unbind(1)
        o = flamia.attention(q.contiguous(), k.contiguous(), v.contiguous(), cu, l,
                             recipe=self.recipe, impl="reference")
        return ((o.float().reshape(b * l, -1) + x) @ self.out).reshape(b, l, -1)


def _tokens():
    g = torch.Generator().manual_seed(1)
    tok = torch.randint(1, LOUD, (2, 96), generator=g)  # the outlier token only as a probe
    tok[0, [0, 33, 40]] = 0
    tok[1, [0, 70]] = 0
    return tok


@pytest.mark.parametrize("recipe,leaks", [("bf16", False), ("mxfp8", False), ("nvfp4_fp8", False),
                                          ("fp8_tensorwise", True)])
def test_model_level_probes(recipe, leaks):
    model = TinyLM(recipe=recipe)
    tok = _tokens()
    for replacement in (None, LOUD):  # the next token id, then an outlier token
        causal = model_causal_probe(model, tok, [(0, 39), (0, 95), (1, 50)], 50, keep=[0],
                                    replacement=replacement)
        cross = model_cross_document_probe(model, tok, [(0, 33, 40), (1, 0, 70)], 50, keep=[0],
                                           replacement=replacement)
        assert causal.n_compared > 0 and cross.n_compared > 0
        if not leaks:
            assert causal.max_abs_delta == 0.0, str(causal)
            assert cross.max_abs_delta == 0.0, str(cross)
    if leaks:  # the outlier token moves a per-tensor amax
        assert causal.max_abs_delta > 0 and cross.max_abs_delta > 0
