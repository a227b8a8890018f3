"""Triton kernels (quantize.py, attention.py) and their launchers; registered as ops in flamia.ops."""

import functools

import torch


@functools.lru_cache(maxsize=None)
def _capability(index: int) -> tuple[int, int]:
    return torch.cuda.get_device_capability(index)


def cuda_major(device: torch.device | None = None) -> int:
    """The compute capability's major version of ``device`` (default: the current CUDA device),
    0 without CUDA. Cached per device: the launchers ask at every call, and
    torch.cuda.get_device_capability costs microseconds of host time each time (cProfile on the
    H200: five calls per forward)."""
    if device is not None:
        return _capability(device.index)[0] if device.type == "cuda" else 0
    return _capability(torch.cuda.current_device())[0] if torch.cuda.is_available() else 0
