"""Shared fixtures. The Triton interpreter must be chosen before triton is imported, so the
interpreter tier sets TRITON_INTERPRET=1 here when there is no GPU."""

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="gpu tier: needs a CUDA GPU (run on the H200)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def device():
    return DEVICE


def rand_qkvdo(total, hq, hkv, d, seed=0, device=DEVICE, dtype=torch.bfloat16):
    g = torch.Generator(device="cpu").manual_seed(seed)
    mk = lambda h: torch.randn(total, h, d, generator=g).to(device=device, dtype=dtype)
    return mk(hq), mk(hkv), mk(hkv), mk(hq)
