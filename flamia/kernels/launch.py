"""Kernel launches with less host time: a JIT kernel sent straight to the launcher of the kernel
triton compiled for it.

``kernel[grid](*args, **kwargs)`` (triton's JITFunction.run) binds and specializes every
argument, builds its cache key as a string (a TMA descriptor spells out its whole layout),
checks that the kernel's global variables have not changed, and only then calls the compiled
kernel's launcher. On short-document workloads the GPU waits for that host time: a BF16 fwd+bwd
makes three Gluon launches, and triton's part of each took 137 us of a 1.6 ms call under cProfile
on an H100 (bench/results/host_layers_20261206_H100.txt).

``launch(kernel, grid, *args, **kwargs)`` keeps, per kernel and per *signature* of its
arguments, the compiled kernel that triton's own launch returned, and sends later launches with
the same signature to its launcher directly. The signature is at least as fine as triton's
specialization (triton 3.6, ``native_specialize_impl``), so a cached kernel is reused only where
triton would have picked that same kernel:

- tensors: dtype and whether the address is 16-byte aligned;
- integers: whether equal to 1, divisible by 16, within int32, at least 2**63 (bool by value);
- floats: one kind (fp32); None: None;
- TensorDescriptors: dtype, block shape, layout, padding and TF32 rounding (the launcher
  encodes the TMA descriptor from the base, shape and strides at every launch, as triton does);
- every keyword argument (constexprs, num_warps, ...) by value; the device.

Anything else (another argument type, a launch hook such as proton's being set) goes through
triton. What a cached launch skips: triton's check of the kernel's global variables (a test
that patches a module constant a kernel reads must set FLAMIA_LAUNCH=jit) and the kernel's
pre-run hooks (none here).

FLAMIA_LAUNCH: ``cached`` (this module's launch, the default) or ``jit`` (triton's own, every
launch). Measured on an H100 (2026-12-06 14:33, ``bash bench/h200_session.sh launch``): the
same bits as triton's launch for every Gluon kernel mode (tests/test_launch.py); host time of
one BF16 fwd+bwd from an idle GPU 1.215 vs 1.379 ms at U(32, 1024) and 1.293 vs 1.428 ms at
lognormal 1k, in one process (bench/results/attention_20261206-1433_*).
"""

from __future__ import annotations

import os

import torch
from triton import knobs

LAUNCH_MODES = ("cached", "jit")
DEFAULT_LAUNCH = "cached"

# (id(kernel), device, argument signature, keyword arguments) -> (compiled kernel, the values of
# the parameters after the positional ones, in order: the launcher takes every parameter)
_compiled: dict = {}
cached_launches = 0  # launches sent straight to a compiled kernel's launcher, for the tests


def launch_mode() -> str:
    mode = os.environ.get("FLAMIA_LAUNCH", DEFAULT_LAUNCH)
    if mode not in LAUNCH_MODES:
        raise ValueError(f"FLAMIA_LAUNCH={mode!r}; accepted: {', '.join(LAUNCH_MODES)}")
    return mode


class _Unsigned(Exception):
    """An argument whose specialization this module does not mirror."""


def _signature(arg):
    if isinstance(arg, torch.Tensor):
        return arg.dtype, arg.data_ptr() % 16 == 0
    if isinstance(arg, bool):
        return bool, arg
    if isinstance(arg, int):
        return int, arg == 1, arg % 16 == 0, -2**31 <= arg < 2**31, arg >= 2**63
    if isinstance(arg, float):
        return float
    if arg is None:
        return None
    if _is_descriptor(arg):
        return (arg.base.dtype, tuple(arg.block_shape), arg.layout, arg.padding,
                getattr(arg, "round_f32_to_tf32", False))  # a field since triton 3.7 or so
    raise _Unsigned(type(arg).__name__)


def _is_descriptor(arg) -> bool:
    # triton's host-side TMA descriptors (triton.tools.tensor_descriptor, gluon's hopper one)
    return type(arg).__name__ == "TensorDescriptor" and hasattr(arg, "block_shape")


def _hooks_set() -> bool:
    return _hook_set(knobs.runtime.launch_enter_hook) or _hook_set(knobs.runtime.launch_exit_hook)


def _hook_set(hook) -> bool:
    # triton 3.6: a HookChain, set when it holds calls (never None); earlier: a function or None
    return bool(hook.calls) if hasattr(hook, "calls") else hook is not None


def _current_stream(device: int) -> int:
    # what triton's launch asks (driver.active.get_current_stream), without a Stream object
    return torch._C._cuda_getCurrentRawStream(device)


def launch(kernel, grid: tuple[int, ...], *args, **kwargs):
    """``kernel[grid](*args, **kwargs)``, through the compiled kernel's launcher when an earlier
    launch of ``kernel`` had the same argument signature (FLAMIA_LAUNCH=cached; see the module
    docstring). Constexprs and launch options go in ``kwargs``."""
    # a stand-in that records launches (bench.gluon_report) has no parameters: triton's path
    if launch_mode() == "jit" or not hasattr(kernel, "params") or _hooks_set():
        return kernel[grid](*args, **kwargs)
    device = torch.cuda.current_device()
    try:
        key = (id(kernel), device, tuple(map(_signature, args)), tuple(sorted(kwargs.items())))
    except _Unsigned:
        return kernel[grid](*args, **kwargs)
    hit = _compiled.get(key)
    if hit is None:
        compiled = kernel[grid](*args, **kwargs)
        if hasattr(compiled, "result"):  # compiled asynchronously
            compiled = compiled.result()
        if not all(hasattr(compiled, a) for a in ("run", "function", "packed_metadata")):
            return compiled  # another triton's compiled kernel: its launches stay with triton
        params = kernel.params
        missing = [p.name for p in params[len(args):] if p.name not in kwargs and not p.has_default]
        if missing:  # triton's launch raised already; kept as an invariant
            raise TypeError(f"{kernel.__name__}: no value for {missing}")
        tail = tuple(kwargs[p.name] if p.name in kwargs else p.default for p in params[len(args):])
        _compiled[key] = compiled, tail
        return compiled
    compiled, tail = hit
    global cached_launches
    cached_launches += 1
    grid = tuple(grid) + (1, ) * (3 - len(grid))
    compiled.run(grid[0], grid[1], grid[2], _current_stream(device), compiled.function,
                 compiled.packed_metadata, None, None, None, *args, *tail)
    return compiled
