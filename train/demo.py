"""The main job's small end-to-end comparison: the debug Llama trained with the BF16 reference
attention and with FLAMIA MXFP8 (on a CPU: the reference of that recipe; on a GPU: the Triton
kernels), same data and seed, then ``train.compare`` on the two runs.

    python -m train.demo [--out outputs/demo] [--steps 30] [--nproc 2]
"""

import argparse
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", default="outputs/demo")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--nproc", type=int, default=2)
    args = ap.parse_args(argv)
    runs = []
    for name, attention in (("bf16_reference", "bf16-reference"), ("mxfp8", "flamia-mxfp8")):
        folder = os.path.join(args.out, name)
        if os.path.exists(os.path.join(folder, "metrics.jsonl")):
            os.remove(os.path.join(folder, "metrics.jsonl"))
        cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={args.nproc}",
               "-m", "train", "--job.config_file", os.path.join(REPO, "configs", "debug_cpu.toml"),
               "--job.dump_folder", folder, "--job.description", name,
               "--flamia.attention", attention, "--training.steps", str(args.steps),
               "--flamia.experiment", "demo"]
        print("+", " ".join(cmd), flush=True)
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
        if proc.returncode != 0:
            print(proc.stderr[-4000:], file=sys.stderr)
            return proc.returncode
        runs.append(folder)
    from train.compare import main as compare

    return compare([*runs, "--out", os.path.join(args.out, "compare.png"), "--smooth", "5",
                    "--tail", "5"])


if __name__ == "__main__":
    sys.exit(main())
