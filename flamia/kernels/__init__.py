"""Triton kernels (quantize.py, attention.py) and their launchers; registered as ops in flamia.ops."""

import functools

import torch


@functools.lru_cache(maxsize=None)
def _capability(index: int) -> tuple[int, int]:
    return torch.cuda.get_device_capability(index)


@functools.lru_cache(maxsize=None)
def _cuda_available() -> bool:
    return torch.cuda.is_available()


def cuda_major(device: torch.device | None = None) -> int:
    """The compute capability's major version of ``device`` (default: the current CUDA device),
    0 without CUDA. Cached per device, and whether CUDA is available once per process: the
    launchers ask at every call (six times per BF16 fwd+bwd without a device), and
    torch.cuda.get_device_capability and torch.cuda.is_available cost microseconds of host time
    each time (cProfile on the H200 and the H100)."""
    if device is not None:
        return _capability(device.index)[0] if device.type == "cuda" else 0
    return _capability(torch.cuda.current_device())[0] if _cuda_available() else 0


def sm_count(device: torch.device) -> int:
    """The number of SMs of a CUDA device (cached, as cuda_major): the persistent kernels launch
    at most one program per SM."""
    return _sm_count(device.index if device.index is not None else torch.cuda.current_device())


@functools.lru_cache(maxsize=None)
def _sm_count(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count
