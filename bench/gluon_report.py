"""The Gluon kernels (flamia/kernels/attention_hopper.py) compiled for sm_90 on any machine (no
GPU needed): shared memory, registers and spills (ptxas), and for every wait for warpgroup MMAs
in flight how many of the softmax's exponentials (MUFU.EX2) ptxas scheduled while those MMAs run
(between the last MMA issue and the wait): the overlap the kernel is built for needs most of a
step's exponentials (64 per thread at 128 x 128 on 8 warps) there.

    python -m bench.gluon_report [--configs 128,128,8,2 64,64,4,2] [--d 128]

(the forward for each configuration, then the dQ and dK/dV kernels; --fwd8 mxfp8 nvfp4_fp8: the
FP8 forward too).

Use the GPU image's triton to judge the GPU's code (see bench/sass_report.py):
    PYTHONPATH=/tmp/t36:$PWD python -m bench.gluon_report
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import tempfile
from unittest import mock

import torch
import triton
from triton import knobs
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon._runtime import GluonASTSource
from triton.runtime.jit import mangle_type

from bench.sass_report import registers_and_spills
from flamia.kernels import attention_hopper as H


def compile_fwd(config: str, d: int = 128, hq: int = 16, hkv: int = 16):
    """The compiled forward for FLAMIA_GLUON_FWD=config."""
    with mock.patch.dict(os.environ, {"FLAMIA_GLUON_FWD": config}):
        m, n, w, st = H.config()
        mode = H.fwd_mode()
    if mode == "persistent":
        return _compile(H._attn_fwd_hopper_persistent_kernel, ("q", "o"), ("k", "v"),
                        (m // 2, n, 4, st), d, hq, hkv, CONSUMER_REGS=H.WS_CONSUMER_REGS,
                        PRODUCER_REGS=H.WS_PRODUCER_REGS, drop=("BLOCK_M", ))
    if mode:  # 64-row Q/O blocks, num_warps = 4 (the default partition)
        return _compile(H._attn_fwd_hopper_ws_kernel, ("q", "o"), ("k", "v"), (m // 2, n, 4, st),
                        d, hq, hkv, PINGPONG=mode == "pingpong", CONSUMER_REGS=H.WS_CONSUMER_REGS,
                        PRODUCER_REGS=H.WS_PRODUCER_REGS, drop=("BLOCK_M", ))
    return _compile(H._attn_fwd_hopper_kernel, ("q", "o"), ("k", "v"), (m, n, w, st), d, hq, hkv)


def compile_dq(d: int = 128, hq: int = 16, hkv: int = 16, mode: str = "plain",
               fuse_delta: bool = True):
    """The compiled dQ kernel (its tiles are fixed: DQ_CONFIG), FLAMIA_GLUON_DQ=mode; fuse_delta:
    delta computed there (FLAMIA_DELTA=dq, the default) or read (kernel)."""
    # O's rows as dO's (FUSE_DELTA), else no O descriptor (constexpr None)
    rows, no_o = (("q", "do", "dq", "o"), {}) if fuse_delta else (("q", "do", "dq"),
                                                                  {"o_desc": None})
    if mode in ("ws", "persistent"):  # 64-row Q/dO/dQ blocks, num_warps = 4
        m, n, _, st = H.DQ_CONFIG
        return _compile(H._attn_bwd_dq_hopper_ws_kernel if mode == "ws" else
                        H._attn_bwd_dq_hopper_persistent_kernel, rows, ("k", "v"),
                        (m // 2, n, 4, st), d, hq, hkv, drop=("BLOCK_M", ),
                        CONSUMER_REGS=H.DQ_WS_CONSUMER_REGS, PRODUCER_REGS=H.DQ_WS_PRODUCER_REGS,
                        FUSE_DELTA=fuse_delta, **no_o)
    return _compile(H._attn_bwd_dq_hopper_kernel, rows, ("k", "v"), H.DQ_CONFIG, d, hq, hkv,
                    FUSE_DELTA=fuse_delta, **no_o)


def compile_dkdv(pipeline: str | None = None, d: int = 128, hq: int = 16, hkv: int = 16,
                 fuse_dq: int = 0, lse_tma: bool = False):
    """The compiled dK/dV kernel (DKDV_CONFIG: query tiles are the "query" descriptors) for
    FLAMIA_GLUON_DKDV=pipeline (None: the warp-specialized kernel at its default ring; on grid
    tiles the default is its persistent version, "2,0,persistent"); fuse_dq: 0 (dQ kernel), 1
    (dQ added in key-tile order), 2 (dQ added unordered)."""
    with mock.patch.dict(os.environ, {"FLAMIA_GLUON_DKDV": pipeline or ""}):
        stages, defer, _, ws = H.dkdv_pipeline()
        persistent = pipeline is not None and H.dkdv_persistent()
    if ws:  # 64-key K/V/dK/dV blocks, num_warps = 4 (the default partition)
        m, n, _ = H.DKDV_CONFIG[:3]
        # lse2 and delta by TMA (FLAMIA_GLUON_DKDV_LSE=tma), else no descriptors (constexpr None)
        lse = {f"{x}_desc": H._vector_view(torch.empty(hq, 4096), m) if lse_tma else None
               for x in ("lse", "delta")}
        if persistent:
            return _compile(H._attn_bwd_dkdv_hopper_persistent_kernel, ("q", "do"),
                            ("k", "v", "dk", "dv"), (m, n // 2, 4, stages), d, hq, hkv,
                            drop=("BLOCK_N", ), descs=lse if lse_tma else None,
                            LSE_TMA=lse_tma, CONSUMER_REGS=H.DKDV_WS_CONSUMER_REGS,
                            PRODUCER_REGS=H.DKDV_WS_PRODUCER_REGS, **({} if lse_tma else lse))
        return _compile(H._attn_bwd_dkdv_hopper_ws_kernel, ("q", "do"), ("k", "v", "dk", "dv"),
                        (m, n // 2, 4, stages), d, hq, hkv, drop=("BLOCK_N", ),
                        descs=lse if lse_tma else None, LSE_TMA=lse_tma,
                        CONSUMER_REGS=H.DKDV_WS_CONSUMER_REGS,
                        PRODUCER_REGS=H.DKDV_WS_PRODUCER_REGS, **({} if lse_tma else lse))
    return _compile(H._attn_bwd_dkdv_hopper_kernel, ("q", "do"), ("k", "v", "dk", "dv"),
                    H.DKDV_CONFIG[:3] + (stages, ), d, hq, hkv, DEFER=defer,
                    FUSE_DQ=fuse_dq > 0, ORDERED=fuse_dq == 1)


def compile_fwd8(d: int = 128, hq: int = 16, hkv: int = 16, qk_dtype=torch.float8_e4m3fn,
                 mode: str = "inflight"):
    """The compiled FP8 forward (FWD8_CONFIG, FLAMIA_GLUON_FWD8=mode); qk_dtype bfloat16:
    nvfp4_fp8's Q and K."""
    m, n, _, st = H.FWD8_CONFIG
    descs = {"q_desc": H._rows_view(torch.empty(4096, hq, d, dtype=qk_dtype), m // 2),
             "k_desc": H._rows_view(torch.empty(4096, hkv, d, dtype=qk_dtype), n),
             "vt_desc": H._token_major_view(
                 torch.empty(hkv, d, 4096, dtype=torch.float8_e4m3fn), n),
             "o_desc": H._rows_view(torch.empty(4096, hq, d, dtype=torch.bfloat16), m // 2)}
    # The scale rows' head stride (2 T) is a multiple of 16 at the benchmark's sizes, which the
    # launch specializes on: the scale loads are 16-byte vectors then.
    return _compile(H._attn_fwd8_hopper_ws_kernel, (), (), (m // 2, n, 4, st), d, hq, hkv,
                    drop=("BLOCK_M", ), descs=descs, aligned=("stride_skh", ),
                    CONSUMER_REGS=H.FWD8_CONSUMER_REGS, PRODUCER_REGS=H.FWD8_PRODUCER_REGS,
                    OVERLAP=mode == "overlap")


def compile_dkdv8(d: int = 128, hq: int = 16, hkv: int = 16, qk_dtype=torch.float8_e4m3fn,
                  setting: str = ""):
    """The compiled FP8 dK/dV kernel for FLAMIA_GLUON_DKDV8=setting ('' = the default,
    attention_hopper.dkdv8_setting: 3,pipe for E4M3 Q and K, 2 for bf16-held ones; ending in
    ",persistent": the persistent kernel); qk_dtype bfloat16: nvfp4_fp8's Q and K."""
    m, n, _ = H.DKDV8_CONFIG
    with mock.patch.dict(os.environ, {"FLAMIA_GLUON_DKDV8": setting}):
        st, schedule, pt_slots = H.dkdv8_setting(qk_dtype)
        persistent = H.dkdv8_persistent()
    fp8 = torch.float8_e4m3fn
    descs = {"q_desc": H._rows_view(torch.empty(4096, hq, d, dtype=qk_dtype), m),
             "k_desc": H._rows_view(torch.empty(4096, hkv, d, dtype=qk_dtype), n),
             "v_desc": H._rows_view(torch.empty(4096, hkv, d, dtype=fp8), n),
             "do_desc": H._rows_view(torch.empty(4096, hq, d, dtype=fp8), m),
             "qt_desc": H._token_major_view(torch.empty(hq, d, 4096, dtype=qk_dtype), m),
             "dot_desc": H._token_major_view(torch.empty(hq, d, 4096, dtype=fp8), m),
             "qrow_desc": H._query_rows_view(torch.empty(hq, 4096, 4), m)}
    kernel, extra = ((H._attn_bwd_dkdv8_hopper_persistent_kernel, {}) if persistent else
                     (H._attn_bwd_dkdv8_hopper_ws_kernel, {"PAIR": schedule == "pair"}))
    return _compile(kernel, (), (), (m, n, 4, st), d, hq, hkv,
                    drop=("BLOCK_N", ), descs=descs, aligned=("stride_skh", ),
                    ptrs={"dk_ptr": "*bf16", "dv_ptr": "*bf16"}, PIPE=schedule == "pipe",
                    PT_SLOTS=pt_slots, CONSUMER_REGS=H.DKDV8_CONSUMER_REGS,
                    PRODUCER_REGS=H.DKDV8_PRODUCER_REGS, **extra)


def _compile(fn, query_descs, key_descs, config, d, hq, hkv, drop=(), descs=None, aligned=(),
             ptrs=None, **extra_consts):
    """Descriptors of CPU tensors stand in for the GPU's: only their dtype, block shape and
    layout enter the signature: bf16 ones for query_descs and key_descs, and ``descs`` by
    argument name for the others; ``aligned``: integer arguments known to be multiples of 16;
    ``ptrs``: pointer types by argument name (default *i32 for the plan's arrays, else *fp32)."""
    m, n, w, st = config
    q = torch.empty(4096, hq, d, dtype=torch.bfloat16)
    k = torch.empty(4096, hkv, d, dtype=torch.bfloat16)
    descs = {**{f"{x}_desc": H._rows_view(q, m) for x in query_descs},
             **{f"{x}_desc": H._rows_view(k, n) for x in key_descs}, **(descs or {})}
    consts = dict(H_Q=hq, H_KV=hkv, HEAD_DIM=d, BLOCK_M=m, BLOCK_N=n, STAGES=st, num_warps=w,
                  **extra_consts)
    for name in drop:  # constexprs this kernel does not take
        del consts[name]
    if "DOC_TILES" in fn.arg_names:  # grid tiles unless asked (kernels.attention.doc_tiles)
        consts.setdefault("DOC_TILES", False)
    sig, attrs = {}, {}
    for i, arg in enumerate(fn.arg_names):
        if arg in consts:
            sig[arg] = "constexpr"
        elif arg in descs:
            sig[arg] = mangle_type(descs[arg])
        elif arg.endswith("_ptr"):
            plan = ("seg_start_ptr", "seg_end_ptr", "order_ptr", "sem_ptr", "queue_ptr")
            outputs = ("o_ptr", "dq_ptr", "dk_ptr", "dv_ptr")  # bf16 (doc tiles' partial stores)
            sig[arg] = (ptrs or {}).get(arg) or ("*i32" if arg in plan else
                                                 "*bf16" if arg in outputs else "*fp32")
            attrs[(i,)] = [["tt.divisibility", 16]]
        else:
            sig[arg] = "fp32" if arg in ("c", "sm_scale") else "i32"  # total, strides, counts
            if arg in aligned:
                attrs[(i,)] = [["tt.divisibility", 16]]
    src = GluonASTSource(fn=fn, signature=sig, attrs=attrs,
                         constexprs={(fn.arg_names.index(a),): v for a, v in consts.items()})
    return triton.compile(src, target=GPUTarget("cuda", 90, 32),
                          options={"num_warps": w, "num_stages": 1})


POINTER_TYPES = {torch.float32: "*fp32", torch.bfloat16: "*bf16", torch.int32: "*i32",
                 torch.float8_e4m3fn: "*fp8e4nv"}


def compile_launch(fn, args, kwargs):
    """Compile for sm_90 exactly what a launcher passes to ``fn`` (a Gluon kernel): positional
    arguments by type (tensors as pointers, TensorDescriptors, ints, floats, None as constexpr;
    ints specialized as triton's launcher does: 1 as a constant, multiples of 16 as such) and
    keyword constexprs, bound to the kernel's parameters by name, every parameter exactly once
    (a launcher/kernel mismatch is an error here, not on the GPU)."""
    names = fn.arg_names
    if len(args) > len(names):
        raise TypeError(f"{fn.__name__}: {len(args)} positional arguments for {len(names)}")
    bound = dict(zip(names, args))
    for k, v in kwargs.items():
        if k not in names or k in bound:
            raise TypeError(f"{fn.__name__}: keyword {k!r} unknown or given twice")
        bound[k] = v
    missing = [n for n in names if n not in bound]
    if missing:
        raise TypeError(f"{fn.__name__}: missing {missing}")
    sig, consts, attrs = {}, {}, {}
    for i, name in enumerate(names):
        v = bound[name]
        if name in kwargs or v is None:
            sig[name] = "constexpr"
            consts[(i,)] = v
        elif isinstance(v, torch.Tensor):
            sig[name] = POINTER_TYPES[v.dtype]
            attrs[(i,)] = [["tt.divisibility", 16]]
        elif isinstance(v, bool):
            raise TypeError(f"{fn.__name__}: {name} is a bool passed positionally")
        elif isinstance(v, int):  # specialized as triton's launcher specializes it
            if v == 1:
                sig[name] = "constexpr"
                consts[(i,)] = 1
            else:
                sig[name] = "i32"
                if v % 16 == 0:
                    attrs[(i,)] = [["tt.divisibility", 16]]
        elif isinstance(v, float):
            sig[name] = "fp32"
        else:
            sig[name] = mangle_type(v)
    src = GluonASTSource(fn=fn, signature=sig, attrs=attrs, constexprs=consts)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32),
                          options={"num_warps": bound["num_warps"], "num_stages": 1})


class LaunchRecorder:
    """Stands in for a kernel: records what a launcher passes, (fn, grid, args, kwargs) per
    launch into ``calls`` (fn: the kernel it stands for, or any label)."""

    def __init__(self, fn, calls):
        self.fn, self.calls = fn, calls

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.calls.append((self.fn, grid, args, kwargs))


def launcher_calls(t: int = 300, hq: int = 8, hkv: int = 2, d: int = 128):
    """(name, kernel, args, kwargs) of each Gluon launcher in its settings (environment), run on
    CPU tensors of a packed batch of T tokens with the kernels recorded instead of launched."""
    from flamia import ops
    from flamia.kernels import attention as K
    from flamia.kernels.quantize import TOKEN_PAD

    calls = []
    kernels = [name for name in dir(H) if name.startswith("_attn_") and name.endswith("_kernel")]
    patches = [mock.patch.object(H, name, LaunchRecorder(getattr(H, name), calls))
               for name in kernels]
    patches.append(mock.patch.object(H, "cuda_major", lambda device=None: 9))
    patches.append(mock.patch.object(H, "sm_count", lambda device: 132))
    g = torch.Generator().manual_seed(0)
    mk = lambda h, dtype=torch.bfloat16: torch.randn(t, h, d, generator=g).to(dtype)
    q, k, v, do = mk(hq), mk(hkv), mk(hkv), mk(hq)
    cu = torch.tensor([0, 100, 257, t], dtype=torch.int32)
    plan = ops.batch_plan(cu, t, d)
    lse = torch.zeros(hq, t)
    delta = torch.zeros(hq, t)
    grads = [torch.empty_like(x) for x in (q, k, v)]
    out = []
    for p in patches:
        p.start()
    try:
        def run(name, env, launch):
            with mock.patch.dict(os.environ, env):
                launch()
            fn, _, args, kwargs = calls.pop()
            out.append((name, fn, args, kwargs))

        o = torch.empty_like(q)
        run("fwd ws", {}, lambda: H.attention_fwd_hopper(q, k, v, plan.seg_start, plan.order_fwd,
                                                         0.1, o, lse))
        run("fwd plain", {"FLAMIA_GLUON_FWD": "128,128,8,2"}, lambda: H.attention_fwd_hopper(
            q, k, v, plan.seg_start, plan.order_fwd, 0.1, o, lse))
        run("fwd persistent", {"FLAMIA_GLUON_FWD": "128,128,8,2,persistent"},
            lambda: H.attention_fwd_hopper(q, k, v, plan.seg_start, plan.order_fwd, 0.1, o, lse))
        for mode in H.DQ_MODES:  # delta computed in the kernel (from O), or read
            run(f"dq {mode}", {"FLAMIA_GLUON_DQ": mode}, lambda: H.attention_dq_hopper(
                q, k, v, do, lse, delta, plan.seg_start, plan.order_dq, 0.1, grads[0], o=o))
            run(f"dq {mode} delta read", {"FLAMIA_GLUON_DQ": mode}, lambda: H.attention_dq_hopper(
                q, k, v, do, lse, delta, plan.seg_start, plan.order_dq, 0.1, grads[0]))
        dkdv = lambda *extra: H.attention_dkdv_hopper(
            q, k, v, do, lse, delta, plan.seg_start, plan.seg_end, plan.order_dkdv, 0.1,
            grads[1], grads[2], *extra)
        for lse_mode in H.LSE_MODES:  # (unset FLAMIA_GLUON_DKDV: the persistent kernel)
            run(f"dkdv ws lse={lse_mode}", {"FLAMIA_GLUON_DKDV": "2,0,ws",
                                             "FLAMIA_GLUON_DKDV_LSE": lse_mode}, dkdv)
        for lse_mode in H.LSE_MODES:
            run(f"dkdv persistent lse={lse_mode}", {"FLAMIA_GLUON_DKDV": "2,0,persistent",
                                                     "FLAMIA_GLUON_DKDV_LSE": lse_mode}, dkdv)
        run("dkdv plain", {"FLAMIA_GLUON_DKDV": "2,0"}, dkdv)
        dqa = torch.zeros(t, hq, d)
        sem = torch.zeros(hq, -(-t // H.DKDV_CONFIG[0]), dtype=torch.int32)
        run("dkdv plain fused dQ", {"FLAMIA_GLUON_DKDV": "2,0"}, lambda: dkdv(dqa, sem))
        # doc tiles (FLAMIA_TILES=doc, kernels.attention.doc_tiles): their own plan
        with mock.patch.dict(os.environ, {"FLAMIA_TILES": "doc"}):
            docs = ops.batch_plan(cu, t, d)
        run("fwd ws doc", {}, lambda: H.attention_fwd_hopper(
            q, k, v, docs.seg_start, docs.order_fwd, 0.1, o, lse, docs.seg_end, True))
        run("fwd plain doc", {"FLAMIA_GLUON_FWD": "128,128,8,2"}, lambda: H.attention_fwd_hopper(
            q, k, v, docs.seg_start, docs.order_fwd, 0.1, o, lse, docs.seg_end, True))
        for mode in ("ws", "plain"):  # the persistent kernels take grid tiles only
            run(f"dq {mode} doc", {"FLAMIA_GLUON_DQ": mode}, lambda: H.attention_dq_hopper(
                q, k, v, do, lse, delta, docs.seg_start, docs.order_dq, 0.1, grads[0],
                docs.seg_end, True, o=o))
        # doc tiles load lse2/delta whatever FLAMIA_GLUON_DKDV_LSE says (H.dkdv_lse_mode)
        run("dkdv ws doc", {}, lambda: H.attention_dkdv_hopper(
            q, k, v, do, lse, delta, docs.seg_start, docs.seg_end, docs.order_dkdv, 0.1,
            grads[1], grads[2], doc_tiles=True))
        # the quantizers' outputs as the kernels take them (shapes, dtypes, layouts; the
        # quantizers are triton kernels, which do not run here)
        fp8 = torch.float8_e4m3fn
        padded = -(-t // TOKEN_PAD) * TOKEN_PAD
        plan8 = ops.batch_plan(cu, t, d, fp8=True)
        v8, do8 = v.to(fp8), do.to(fp8)
        vt8 = torch.zeros(hkv, d, padded, dtype=fp8)
        dot8 = torch.zeros(hq, d, padded, dtype=fp8)
        sq = torch.ones(hq, t)
        skv = torch.ones(hkv, t, K.KROW)
        qrow = torch.zeros(hq, t, K.QROW)
        for recipe in ("mxfp8", "nvfp4_fp8"):
            qk_dtype = torch.bfloat16 if recipe == "nvfp4_fp8" else fp8
            q8, k8 = q.to(qk_dtype), k.to(qk_dtype)
            qt8 = torch.zeros(hq, d, padded, dtype=qk_dtype)
            for mode in H.FWD8_MODES:
                run(f"fwd8 {recipe} {mode}", {"FLAMIA_GLUON_FWD8": mode},
                    lambda: H.attention_fwd8_hopper(q8, k8, vt8, sq, skv, plan8.seg_start,
                                                    plan8.order_fwd, 0.1, o, lse))
            for setting in ("", "3,pipe", "3,pair", "persistent"):
                run(f"dkdv8 {recipe} {setting or 'default'}", {"FLAMIA_GLUON_DKDV8": setting},
                    lambda: H.attention_dkdv8_hopper(q8, k8, v8, do8, qt8, dot8, qrow, skv,
                                                     plan8.seg_end, plan8.order_dkdv, 0.1,
                                                     grads[1], grads[2]))
    finally:
        for p in patches:
            p.stop()
    return out


def sass_lines(cubin: bytes) -> list[str]:
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        out = subprocess.run([knobs.nvidia.cuobjdump.path, "-sass", f.name], capture_output=True,
                             text=True).stdout
    return [line for line in out.splitlines() if re.match(r"\s+/\*[0-9a-f]{4,}\*/", line)]


def print_step_loops(lines: list[str]) -> None:
    """The SASS of each pipelined step loop: a backward branch whose body issues MMAs and holds
    no other such loop (the mbarrier wait loops inside it issue none; the loops over query heads
    or ranges that hold step loops are left out). Per loop: instructions per warp, MMAs,
    exponentials, spill stores / loads."""
    code = [(int(a, 16), t.strip()) for a, t in
            (re.match(r"\s+/\*([0-9a-f]{4,})\*/\s+([^;]*);", line).groups() for line in lines)]
    spans = []
    for addr, text in code:
        target = re.search(r"BRA (0x[0-9a-f]+)", text)
        if target and int(target.group(1), 16) < addr:
            body = [t for a, t in code if int(target.group(1), 16) <= a <= addr]
            if any("GMMA" in t for t in body):
                spans.append((int(target.group(1), 16), addr, body))
    for lo, hi, body in spans:
        if any((a, b) != (lo, hi) and lo <= a and b <= hi for a, b, _ in spans):
            continue
        count = lambda op: sum(op in t for t in body)
        print(f"  step loop: {len(body)} instructions, {count('GMMA')} MMAs, "
              f"{count('MUFU')} MUFU, spills {count('STL')} / {count('LDL')}")


def overlapped_exps(lines: list[str]) -> list[tuple[str, int]]:
    """For every wait for MMAs in flight (WARPGROUP.DEPBAR.LE gsb0, N): the exponentials issued
    between the last MMA issue before it and the wait, i.e. those that overlap in-flight MMAs."""
    out, last_mma = [], None
    for i, line in enumerate(lines):
        if "HGMMA" in line:
            last_mma = i
        m = re.search(r"WARPGROUP\.DEPBAR\.LE gsb0, (0x\d+)", line)
        if m and last_mma is not None:
            out.append((m.group(1), sum("MUFU.EX2" in lines[t] for t in range(last_mma, i))))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--configs", nargs="*", default=[",".join(map(str, H.DEFAULT_CONFIG))])
    ap.add_argument("--dkdv", nargs="*", default=[""],
                    help="FLAMIA_GLUON_DKDV values of the dK/dV kernel ('' = default)")
    ap.add_argument("--lse-tma", action="store_true",
                    help="warp-specialized dK/dV kernel: also with FLAMIA_GLUON_DKDV_LSE=tma")
    ap.add_argument("--fuse-dq", type=int, nargs="+", default=[0],
                    help="dK/dV kernel: 0 dQ kernel, 1 fused dQ ordered, 2 fused dQ unordered")
    ap.add_argument("--dq", nargs="*", default=["plain"], choices=H.DQ_MODES,
                    help="FLAMIA_GLUON_DQ values of the dQ kernel")
    ap.add_argument("--fwd8", nargs="*", default=[],
                    help="also the FP8 forward: recipe[:FLAMIA_GLUON_FWD8], e.g. mxfp8 "
                         "nvfp4_fp8 mxfp8:overlap")
    ap.add_argument("--dkdv8", nargs="*", default=[],
                    help="also the FP8 dK/dV kernel: recipe[:FLAMIA_GLUON_DKDV8], e.g. mxfp8 "
                         "nvfp4_fp8 mxfp8:3,pipe mxfp8:3,pair")
    ap.add_argument("--launchers", action="store_true",
                    help="instead: run each Gluon launcher on CPU tensors with its kernel recorded, "
                         "and compile exactly what it passes")
    ap.add_argument("--tokens", type=int, default=300,
                    help="--launchers: packed tokens T (the launch specializes on T %% 16)")
    ap.add_argument("--heads", type=int, nargs=2, default=[8, 2], metavar=("HQ", "HKV"),
                    help="--launchers: query and kv heads (default 8 2: GQA groups of 4)")
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--loops", action="store_true",
                    help="also the SASS of each loop that issues MMAs and holds no other such "
                         "loop (the step loops; ptxas's block layout can make an outer loop "
                         "look like one): instructions per warp, MMAs, MUFU, spills")
    args = ap.parse_args(argv)
    if args.launchers:
        print(f"# triton {triton.__version__}, sm_90, D={args.d}, T={args.tokens}, Hq/Hkv="
              f"{args.heads[0]}/{args.heads[1]}: the launchers' calls compiled")
        for name, fn, call_args, call_kwargs in launcher_calls(args.tokens, *args.heads, args.d):
            compiled = compile_launch(fn, call_args, call_kwargs)
            print(f"launch {name}: {fn.__name__}, shared {compiled.metadata.shared} B, "
                  f"{registers_and_spills(compiled.asm['ptx'])}")
        return
    print(f"# triton {triton.__version__}, sm_90, D={args.d}")
    dq = ",".join(map(str, H.DQ_CONFIG))
    dkdv = ",".join(map(str, H.DKDV_CONFIG[:3]))
    for name, compiled in [(f"fwd {c}", compile_fwd(c, args.d)) for c in args.configs] + [
            (f"dq {dq} {m}", compile_dq(args.d, mode=m)) for m in args.dq] + [
            (f"dkdv {dkdv} {p or 'default'} fuse_dq={f}", compile_dkdv(p, args.d, fuse_dq=f))
            for p in args.dkdv for f in args.fuse_dq if not (p.endswith("ws") and f)] + [
            (f"dkdv {dkdv} {p} lse=tma", compile_dkdv(p, args.d, lse_tma=True))
            for p in args.dkdv if p.endswith("ws") and args.lse_tma] + [
            (f"fwd8 {r}", compile_fwd8(args.d, qk_dtype=torch.bfloat16 if r.startswith("nvfp4")
                                       else torch.float8_e4m3fn,
                                       mode=r.split(":")[1] if ":" in r else "inflight"))
            for r in args.fwd8] + [
            (f"dkdv8 {r}", compile_dkdv8(args.d, qk_dtype=torch.bfloat16 if r.startswith("nvfp4")
                                         else torch.float8_e4m3fn,
                                         setting=r.split(":")[1] if ":" in r else ""))
            for r in args.dkdv8]:
        print(f"gluon {name}: shared {compiled.metadata.shared} B, "
              f"{registers_and_spills(compiled.asm['ptx'])}")
        lines = sass_lines(compiled.asm["cubin"])
        # HGMMA: BF16 MMAs; QGMMA: FP8 ones
        print(f"  HGMMA {sum('HGMMA' in line for line in lines)} "
              f"QGMMA {sum('QGMMA' in line for line in lines)}")
        print("  MMA waits (pending groups allowed: exponentials overlapping the MMAs in flight): "
              + ", ".join(f"{n}: {e}" for n, e in overlapped_exps(lines)))
        if args.loops:
            print_step_loops(lines)

if __name__ == "__main__":
    main()
