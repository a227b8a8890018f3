"""flamia.attention: contract, autograd, and one clear error per kind of bad input."""

import pytest
import torch

import flamia
from flamia.reference import attention_forward_backward, reference_attention

from conftest import rand_qkvdo


def _inputs(total=64, hq=4, hkv=2, d=64):
    q, k, v, _ = rand_qkvdo(total, hq, hkv, d, device="cpu")
    cu = torch.tensor([0, 10, total], dtype=torch.int32)
    return q, k, v, cu


def test_reference_impl_forward_backward():
    q, k, v, cu = _inputs()
    do = torch.randn_like(q)
    got = attention_forward_backward(
        lambda *a: flamia.attention(*a, 54, recipe="mxfp8", impl="reference"), q, k, v, do, cu
    )
    want = attention_forward_backward(reference_attention, q, k, v, do, cu, recipe="mxfp8")
    for a, b in zip(got, want):
        assert a.dtype == torch.bfloat16
        assert torch.equal(a, b)


def _bad(**change):
    q, k, v, cu = _inputs()
    args = dict(q=q, k=k, v=v, cu_seqlens=cu, max_seqlen=64)
    kwargs = {}
    for key, val in change.items():
        (args if key in args else kwargs)[key] = val
    return args, kwargs


BAD = [
    (dict(q=torch.randn(64, 4, 64)), TypeError, "bfloat16"),
    (dict(q=torch.randn(64, 256).bfloat16()), ValueError, "rank 3"),
    (dict(k=torch.randn(64, 3, 64).bfloat16(), v=torch.randn(64, 3, 64).bfloat16()), ValueError, "multiple of Hkv"),
    (dict(q=torch.randn(64, 4, 96).bfloat16(), k=torch.randn(64, 2, 96).bfloat16(),
          v=torch.randn(64, 2, 96).bfloat16()), ValueError, "head dim"),
    (dict(v=torch.randn(64, 2, 32).bfloat16()), ValueError, "same shape"),
    (dict(cu_seqlens=torch.tensor([1, 10, 64], dtype=torch.int32)), ValueError, "start at 0"),
    (dict(cu_seqlens=torch.tensor([0, 10, 63], dtype=torch.int32)), ValueError, "end at"),
    (dict(cu_seqlens=torch.tensor([0, 10, 10, 64], dtype=torch.int32)), ValueError, "strictly increasing"),
    (dict(cu_seqlens=torch.tensor([0, 30, 20, 64], dtype=torch.int32)), ValueError, "strictly increasing"),
    (dict(cu_seqlens=torch.tensor([0, 10, 64], dtype=torch.int64)), TypeError, "int32"),
    (dict(cu_seqlens=torch.tensor([[0, 64]], dtype=torch.int32)), ValueError, "1-D"),
    (dict(max_seqlen=20), ValueError, "max_seqlen"),
    (dict(max_seqlen=2.5), TypeError, "max_seqlen"),
    (dict(recipe="fp8"), ValueError, "unknown recipe"),
    (dict(impl="cuda"), ValueError, "unknown impl"),
    (dict(softmax_scale=-1.0), ValueError, "softmax_scale"),
]


@pytest.mark.parametrize("change,exc,msg", BAD)
def test_bad_input_gets_clear_error(change, exc, msg):
    args, kwargs = _bad(**change)
    with pytest.raises(exc, match=msg):
        flamia.attention(**args, **kwargs, **({"impl": "reference"} if "impl" not in kwargs else {}))


@pytest.mark.gpu
def test_cu_seqlens_on_wrong_device_is_rejected():
    q, k, v, cu = _inputs()
    with pytest.raises(ValueError, match="device"):
        flamia.attention(q.cuda(), k.cuda(), v.cuda(), cu, 64)


def test_recipes_are_listed():
    assert set(flamia.SAFE_RECIPES) == {"bf16", "mxfp8", "nvfp4_fp8", "fp8_rowwise"}
    assert set(flamia.LEAKY_RECIPES) == {"mxfp8_seqblock", "fp8_tensorwise"}


def test_validation_cache_sees_in_place_changes():
    q, k, v, cu = _inputs()
    flamia.attention(q, k, v, cu, 64, recipe="bf16", impl="reference")
    cu[1] = 0  # the same tensor, now with an empty segment
    with pytest.raises(ValueError, match="strictly increasing"):
        flamia.attention(q, k, v, cu, 64, recipe="bf16", impl="reference")
