"""flamia/kernels/launch.py: the cached launch (FLAMIA_LAUNCH=cached) reuses a compiled kernel only
where triton's own launch would pick the same one, passes every parameter to its launcher, and
on the GPU gives the bits of triton's launch."""

import itertools

import pytest
import torch

import flamia
from flamia.kernels import launch as L

from conftest import DEVICE, rand_qkvdo
from test_kernels import _cu

HOPPER = DEVICE == "cuda" and torch.cuda.get_device_capability()[0] == 9


def _descriptor(t, block, swizzle_rows=None):
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
    layout = gl.NVMMASharedLayout.get_default_for(
        [swizzle_rows or block, t.shape[-1]], gl.bfloat16 if t.dtype == torch.bfloat16
        else gl.float32)
    return TensorDescriptor(t, list(t.shape), list(t.stride()), [block, t.shape[-1]], layout)


def _arguments():
    """Arguments that triton specializes differently, and some it does not."""
    x = torch.zeros(64, 64, dtype=torch.bfloat16)
    y = torch.zeros(64, 64, dtype=torch.float32)
    ints = [0, 1, 2, 15, 16, 17, 32, 2**31 - 16, 2**31 - 1, 2**31, 2**31 + 16, -16, -(2**31),
            -(2**31) - 1, 2**62, 2**63, 2**63 + 16]
    return ints + [True, False, 0.5, 1.0, None, x, x[1:], x.view(-1)[8:], x.view(-1)[3:], y,
                   y.view(-1)[4:], _descriptor(x, 64), _descriptor(x, 32),
                   _descriptor(x, 64, swizzle_rows=16), _descriptor(y, 64), _descriptor(x[32:], 64)]


def test_signature_is_at_least_as_fine_as_triton_specialization():
    """Two arguments of one signature are specialized alike by triton (native_specialize_impl
    with the arguments of triton's binder): the cached launch cannot reuse a kernel that triton
    would have compiled anew."""
    native = pytest.importorskip("triton._C.libtriton").native_specialize_impl
    from triton.backends.compiler import BaseBackend
    args = _arguments()
    spec = [native(BaseBackend, a, False, True, True) for a in args]
    sig = [L._signature(a) for a in args]
    for i, j in itertools.combinations(range(len(args)), 2):
        if sig[i] == sig[j]:
            assert spec[i] == spec[j], (args[i], args[j], spec[i], spec[j])
    # and it is not so fine that every call compiles: the same kind of argument, another value
    assert L._signature(48) == L._signature(64) and L._signature(3) == L._signature(5)
    assert L._signature(torch.zeros(8)) == L._signature(torch.ones(8))


def test_signature_refuses_what_it_does_not_know():
    with pytest.raises(L._Unsigned):
        L._signature("text")
    with pytest.raises(L._Unsigned):
        L._signature([1, 2])


class _FakeParam:
    def __init__(self, name, default=None, has_default=False):
        self.name, self.default, self.has_default = name, default, has_default


class _FakeKernel:
    """A JIT kernel's launch surface: kernel[grid](...) compiles (recorded) and returns a
    compiled kernel whose launcher records its arguments."""
    __name__ = "fake"

    def __init__(self):
        self.params = [_FakeParam("x"), _FakeParam("n"), _FakeParam("BLOCK"),
                       _FakeParam("FLAG", default=False, has_default=True)]
        self.compiles, self.launches = [], []
        fake = self

        class Compiled:
            function, packed_metadata = "function", "metadata"

            def run(self, *a):
                fake.launches.append(a)
        self.compiled = Compiled()

    def __getitem__(self, grid):
        def compile_and_run(*args, **kwargs):
            self.compiles.append((grid, args, kwargs))
            return self.compiled
        return compile_and_run


def test_cached_launch_passes_every_parameter(monkeypatch):
    """The second launch of a signature goes to the compiled kernel's launcher with the grid
    padded to 3D, the current stream, no launch metadata or hooks, and every parameter in
    order (keyword constexprs and defaults after the positional ones); another signature
    compiles again; FLAMIA_LAUNCH=jit always goes through triton."""
    monkeypatch.setattr(L.torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(L, "_current_stream", lambda device: 1234)
    monkeypatch.setattr(L, "_hooks_set", lambda: False)
    monkeypatch.setattr(L, "_compiled", {})
    monkeypatch.setenv("FLAMIA_LAUNCH", "cached")
    monkeypatch.setattr(L, "cached_launches", 0)
    kernel, x = _FakeKernel(), torch.zeros(4)
    assert L.launch(kernel, (5, ), x, 100, BLOCK=64) is kernel.compiled
    assert len(kernel.compiles) == 1 and not kernel.launches
    L.launch(kernel, (7, 2), x, 200, BLOCK=64)  # 200 % 16 == 100 % 16 != 0: same signature
    assert len(kernel.compiles) == 1
    assert kernel.launches == [(7, 2, 1, 1234, "function", "metadata", None, None, None, x, 200,
                                64, False)]
    L.launch(kernel, (5, ), x, 96, BLOCK=64)  # divisible by 16: triton specializes
    L.launch(kernel, (5, ), x, 100, BLOCK=32)  # another constexpr
    L.launch(kernel, (5, ), x, 100, BLOCK=64, FLAG=True)
    L.launch(kernel, (5, ), x.view(-1)[1:], 100, BLOCK=64)  # not 16-byte aligned
    assert len(kernel.compiles) == 5 and len(kernel.launches) == 1
    L.launch(kernel, (5, ), x, 100, BLOCK=64, FLAG=True)
    assert kernel.launches[-1][-4:] == (x, 100, 64, True) and len(kernel.compiles) == 5
    assert L.cached_launches == 2
    L.launch(kernel, (5, ), x, 100, "text", BLOCK=64)  # an argument it cannot sign: triton's
    assert len(kernel.compiles) == 6
    monkeypatch.setenv("FLAMIA_LAUNCH", "jit")
    L.launch(kernel, (5, ), x, 100, BLOCK=64)
    assert len(kernel.compiles) == 7 and len(kernel.launches) == 2
    monkeypatch.setenv("FLAMIA_LAUNCH", "fast")
    with pytest.raises(ValueError, match="FLAMIA_LAUNCH='fast'; accepted: cached, jit"):
        L.launch(kernel, (5, ), x, 100, BLOCK=64)


def test_cached_launch_leaves_hooked_launches_to_triton(monkeypatch):
    """With a launch hook set (a profiler's), every launch goes through triton, which computes
    the launch metadata the hook reads."""
    monkeypatch.setattr(L.torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(L, "_hooks_set", lambda: True)
    monkeypatch.setenv("FLAMIA_LAUNCH", "cached")
    kernel = _FakeKernel()
    for _ in range(2):
        L.launch(kernel, (1, ), torch.zeros(4), 3, BLOCK=16)
    assert len(kernel.compiles) == 2 and not kernel.launches


def test_launch_hooks_are_seen():
    """triton's launch hooks as triton holds them (3.6: chains of calls, empty when unset)."""
    from triton import knobs

    def hook(metadata):
        pass
    assert not L._hooks_set()
    chain = knobs.runtime.launch_enter_hook
    if not hasattr(chain, "add"):
        pytest.skip("this triton's launch hooks are plain attributes")
    chain.add(hook)
    try:
        assert L._hooks_set()
    finally:
        chain.remove(hook)
    assert not L._hooks_set()


def _fwd_bwd(lengths, hq, hkv, d, recipe):
    cu = _cu(lengths, "cuda")
    q, k, v, do = rand_qkvdo(sum(lengths), hq, hkv, d, seed=11, device="cuda")
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    o = flamia.attention(q, k, v, cu, max(lengths), recipe=recipe, impl="triton")
    return (o, *torch.autograd.grad(o, (q, k, v), do))


@pytest.mark.gpu
@pytest.mark.skipif(not HOPPER, reason="the Gluon kernels' launches: need a Hopper GPU (sm_90)")
@pytest.mark.parametrize("setting", [
    {},  # the defaults: persistent forward, dQ with delta and dK/dV
    {"FLAMIA_GLUON_FWD": "128,128,8,2,ws", "FLAMIA_GLUON_DQ": "ws",
     "FLAMIA_GLUON_DKDV": "2,0,ws"},
    {"FLAMIA_GLUON_FWD": "128,128,8,2", "FLAMIA_GLUON_DQ": "plain", "FLAMIA_GLUON_DKDV": "2,0",
     "FLAMIA_DELTA": "kernel"},
    {"FLAMIA_TILES": "doc"},
    {"recipe": "mxfp8", "FLAMIA_FWD_KERNEL": "gluon", "FLAMIA_DKDV_KERNEL": "gluon"}])
def test_cached_launch_gives_the_bits_of_triton_launch(setting, monkeypatch):
    """O, dQ, dK, dV bit for bit as triton's launch gives them, on the first cached launch
    (compiled through triton) and on the later ones (straight to the launcher), across workloads
    whose token counts and strides triton specializes differently."""
    setting = dict(setting)
    recipe = setting.pop("recipe", "bf16")
    for env, value in setting.items():
        monkeypatch.setenv(env, value)
    before = L.cached_launches
    cases = [([1000, 7, 129, 1, 911], 8, 2, 128), ([512] * 4, 4, 4, 64),
             ([33, 700, 3], 4, 1, 128)]
    for case in cases:
        monkeypatch.setenv("FLAMIA_LAUNCH", "jit")
        want = _fwd_bwd(*case, recipe)
        monkeypatch.setenv("FLAMIA_LAUNCH", "cached")
        for call in range(3):
            got = _fwd_bwd(*case, recipe)
            for name, w, g in zip(("O", "dQ", "dK", "dV"), want, got):
                assert torch.equal(w, g), f"{case} call {call}: {name} differs"
    assert L.cached_launches > before, "no launch went through the cache"
