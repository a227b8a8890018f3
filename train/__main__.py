"""Pretraining entry point: torchtitan 0.2.2's trainer with FLAMIA attention.

    # CPU (gloo), the debug model, 2 processes:
    torchrun --nproc_per_node=2 -m train --job.config_file configs/debug_cpu.toml
    # one H200, the 125M model, BF16 baseline and MXFP8:
    torchrun --nproc_per_node=1 -m train --job.config_file configs/llama3_125m_bf16.toml
    torchrun --nproc_per_node=1 -m train --job.config_file configs/llama3_125m_mxfp8.toml
    # any config key can be overridden on the command line:
    torchrun --nproc_per_node=8 -m train --job.config_file configs/llama3_1b_mxfp8.toml \
        --training.steps 2000 --flamia.attention flamia-bf16

The attention backend is one line of the config: [flamia] attention = "flamia-mxfp8" (see
model/attention.py for the list). Without a GPU the same command runs on the CPU with gloo.
"""

import torch


def main() -> None:
    from train import titan  # registers the train spec and the [flamia] config section

    if not torch.cuda.is_available():
        titan.enable_cpu()
    from torchtitan.train import main as torchtitan_main

    torchtitan_main(titan.FlamiaTrainer)


if __name__ == "__main__":
    main()
