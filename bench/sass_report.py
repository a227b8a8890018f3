"""Registers, spills and the SASS of each inner loop of the attention kernels, compiled for
sm_90 on any machine (no GPU needed), with the ptxas and cuobjdump that triton bundles.

    python -m bench.sass_report [--kernels fwd dq dkdv] [--warps W] [--stages 2] [--maxnreg R]

What it measures is instruction issue and register pressure, not time; times come from
bench/attention.py on the GPU. Instructions predicated "@!PT" (predicate never true: ptxas's
no-op filler, e.g. "@!PT LDS RZ, [RZ]" around cp.async) have their own column; until
2026-12-03 evening they were counted as "lds". A loop is a backward branch; each kernel has three (masked
boundary tiles, unmasked tiles, masked diagonal tiles), the middle one carries most of the work.
Kernels: fwd, dq, dkdv (BF16's and FP8's fused dK/dV) and FP8's dkdv_dv / dkdv_dk parts (the
default FP8 backward). Tile shapes and compile hints are the launchers' (bench/ir_report.py: the
tile table of flamia.kernels.attention per recipe family; FLAMIA_*_BLOCKS overrides it).

Use the GPU image's triton to judge the GPU's code: the local 3.9 and the H200's 3.6 compile
these kernels differently (2026-12-03: the FP8 dK/dV kernel spills 2.2 KB per thread with 3.6,
1.2 KB with 3.9):
    pip install --no-deps --target /tmp/t36 triton==3.6.0
    PYTHONPATH=/tmp/t36:$PWD python -m bench.sass_report
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import tempfile

from triton.backends.nvidia.compiler import get_ptxas
from triton import knobs

from bench.ir_report import KERNELS, compile_for, fp8_variants

CLASSES = {  # opcode prefix -> column
    "QGMMA": "mma", "HGMMA": "mma", "FMUL": "fmul", "FFMA": "ffma", "FADD": "fadd",
    "FMNMX": "fmnmx", "MUFU": "mufu", "F2FP": "cvt", "SHFL": "shfl", "PRMT": "prmt",
    "STL": "spill st", "LDL": "spill ld", "LDS": "lds", "LDGSTS": "async cp", "BAR": "bar",
}


def registers_and_spills(ptx: str) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "k.ptx")
        with open(src, "w") as f:
            f.write(ptx)
        out = subprocess.run([get_ptxas(90).path, "-v", "-arch=sm_90a", src, "-o",
                              os.path.join(tmp, "k.cubin")], capture_output=True, text=True)
    regs = re.search(r"Used (\d+) registers", out.stderr)
    spill = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", out.stderr)
    if not regs:
        return f"ptxas: {out.stderr.strip()[-200:]}"
    return f"{regs.group(1)} registers, spills {spill.group(1)} B stored / {spill.group(2)} B loaded"


def sass_loops(cubin: bytes) -> list[tuple[int, collections.Counter]]:
    """(instruction count, opcode classes) of every loop (a backward branch) of the kernel."""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        sass = subprocess.run([knobs.nvidia.cuobjdump.path, "-sass", f.name],
                              capture_output=True, text=True, check=True).stdout
    code = [(int(a, 16), op.strip()) for a, op in re.findall(r"/\*([0-9a-f]{4,})\*/\s+([^;]*);", sass)]
    loops = []
    for addr, text in code:
        target = re.search(r"BRA (0x[0-9a-f]+)", text)
        if target and int(target.group(1), 16) < addr:
            body = [t for a, t in code if int(target.group(1), 16) <= a <= addr]
            ops = collections.Counter()
            for t in body:
                if t.startswith("@!PT "):  # predicate never true: ptxas's no-op filler
                    ops["@!PT"] += 1
                    continue
                op = re.sub(r"^@!?U?P\w+\s+", "", t).split()[0]
                ops[next((c for p, c in CLASSES.items() if op.startswith(p)), "other")] += 1
            loops.append((len(body), ops))
    return loops


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--kernels", nargs="+", choices=list(KERNELS), default=list(KERNELS))
    ap.add_argument("--warps", type=int, default=None,
                    help="default: 8 for bf16, 4 for the FP8 kernels (the H200 autotuner's picks)")
    ap.add_argument("--stages", type=int, default=2)
    ap.add_argument("--maxnreg", type=int, default=None,
                    help="register cap per thread (FLAMIA_AUTOTUNE's WxSrR), e.g. 128")
    args = ap.parse_args(argv)
    cols = list(dict.fromkeys(CLASSES.values())) + ["@!PT", "other"]
    warps = args.warps or "8 (bf16) / 4 (fp8)"
    print(f"sm_90, D=128, {warps} warps, {args.stages} stages, register cap "
          f"{args.maxnreg or '-'}; per loop: instructions "
          f"({', '.join(cols)})")
    for name in args.kernels:
        for fp8 in fp8_variants(name):
            c = compile_for(name, fp8, warps=args.warps, stages=args.stages, maxnreg=args.maxnreg)
            print(f"{name:7} {'mxfp8' if fp8 else 'bf16 '}: {registers_and_spills(c.asm['ptx'])}")
            for i, (n, ops) in enumerate(sass_loops(c.asm["cubin"])):
                print(f"    loop {i}: {n:5} ({', '.join(str(ops[k]) for k in cols)})")


if __name__ == "__main__":
    main()
