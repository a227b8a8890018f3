"""Forward and backward times of the BF16 dQ modes (FLAMIA_DQ=separate|fused) and the GPU time
per kernel, on three benchmark workloads, without bench.attention's correctness gate: a
diagnostic for bench/dq_diagnose.sh, whose patched variants compute a wrong or nondeterministic
dQ on purpose. Prints each mode's dQ relative difference to the separate mode.

    PYTHONPATH=$PWD python -m bench.dq_time
"""

from __future__ import annotations

import os

import torch

from bench.attention import kernel_profile, prep_flamia, time_provider, workload_inputs


def main():
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}")
    for dist in ("one_doc", "u32_1024", "lognormal_1k"):
        lengths, q, k, v, do, cu = workload_inputs(dist, 4, 8192, 16, 16, 128)
        dq = {}
        for mode in ("separate", "fused"):
            os.environ["FLAMIA_DQ"] = mode
            fn = prep_flamia(q, k, v, cu, lengths, 8192)
            q.grad = None
            fn().backward(do)
            dq[mode] = q.grad.float()
            fwd, both = time_provider(fn, q, k, v, do)
            prof = kernel_profile(fn, q, k, v, do)
            diff = ((dq[mode] - dq["separate"]).norm() / dq["separate"].norm()).item()
            kernels = ", ".join(f"{name.split('_attn_')[-1]} {ms:.3f}" for name, ms in prof.items()
                                if ms >= 0.005)
            print(f"{dist:12} {mode:8} fwd {fwd:.3f} bwd {both - fwd:.3f} ms, dQ rel diff "
                  f"{diff:.1e}; kernels (ms): {kernels}", flush=True)


if __name__ == "__main__":
    main()
