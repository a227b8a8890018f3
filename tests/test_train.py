"""The trainer on CPU: a 2-process torchrun job through the real entry point, resume equality,
config validation, and model-level leakage probes on the torchtitan model."""

import json
import os
import subprocess
import sys

import pytest
import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(REPO, "configs", "debug_cpu.toml")


def torchrun(tmp, *args, nproc=2, timeout=600):
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}",
           "--master_port", str(29500 + os.getpid() % 1000), "-m", "train",
           "--job.config_file", CONFIG, "--job.dump_folder", str(tmp), *args]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout)
    return proc


def losses(folder):
    with open(os.path.join(folder, "metrics.jsonl")) as f:
        return {r["step"]: r["loss"] for r in map(json.loads, f)}


def test_two_process_training_loss_goes_down(tmp_path):
    proc = torchrun(tmp_path, "--training.steps", "20")
    assert proc.returncode == 0, proc.stderr[-3000:]
    loss = losses(tmp_path)
    assert sorted(loss) == list(range(1, 21))
    first, last = sum(loss[s] for s in (1, 2, 3)) / 3, sum(loss[s] for s in (18, 19, 20)) / 3
    assert last < first - 1.0, f"loss did not go down enough: {first:.3f} -> {last:.3f}"


def test_resume_is_bitwise_equal(tmp_path):
    common = ["--lr_scheduler.total_steps", "8", "--checkpoint.enable",
              "--checkpoint.interval", "4"]
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    for folder, steps in ((straight, 8), (resumed, 4), (resumed, 8)):
        proc = torchrun(folder, "--training.steps", str(steps), *common)
        assert proc.returncode == 0, proc.stderr[-3000:]
    a, b = losses(straight), losses(resumed)
    assert sorted(b) == list(range(1, 9))  # the second launch resumed at step 5
    for step in range(5, 9):
        assert a[step] == b[step], f"step {step}: {a[step]!r} != {b[step]!r}"


def test_mxfp8_backend_trains_one_process(tmp_path):
    proc = torchrun(tmp_path, "--training.steps", "4", "--flamia.attention", "flamia-mxfp8",
                    nproc=1)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert all(torch.isfinite(torch.tensor(v)) for v in losses(tmp_path).values())


@pytest.mark.parametrize("args,message", [
    (["--flamia.attention", "fastest"], "unknown attention backend"),
    (["--training.seq_len", "250"], "multiple of 64"),
    (["--flamia.corpus", "/nonexistent/corpus.jsonl"], "neither an embedded corpus"),
    (["--flamia.attention", "flamia-fp8_tensorwise"], "leaky control recipe"),
    (["--model.flavor", "7B"], "unknown model.flavor"),
])
def test_bad_config_fails_before_compute(tmp_path, args, message):
    proc = torchrun(tmp_path, *args, nproc=1, timeout=300)
    assert proc.returncode != 0
    assert message in proc.stderr + proc.stdout
    assert not os.path.exists(tmp_path / "metrics.jsonl"), "no step may run"


def test_unsupported_head_dim_is_rejected(monkeypatch):
    from model.attention import check_backend

    with pytest.raises(ValueError, match="head dim 32"):
        check_backend("flamia-mxfp8", 32)
    check_backend("sdpa", 32)  # torchtitan's own backends take any head dim


# ---- model-level probes on the torchtitan model ---------------------------------------------


def _model(backend):
    from train.titan import FLAVORS, FlamiaTransformer

    import copy

    args = copy.deepcopy(FLAVORS["debug"])
    args.vocab_size, args.attention_backend, args.max_seq_len = 64, backend, 128
    args.attn_type = {"sdpa": "sdpa"}.get(backend, "varlen")
    args.attn_mask_type = "causal" if backend == "sdpa" else "block_causal"
    torch.manual_seed(0)
    model = FlamiaTransformer(args)
    with torch.no_grad():
        model.init_weights()
        model.tok_embeddings.weight[63] *= 300.0  # an outlier token for the per-tensor control
    return model.eval()


def _logits_fn(model, positions):
    def run(tokens):
        masks = None
        if model.model_args.attn_type != "sdpa":
            masks = model.get_attention_masks(tokens, None, {"positions": positions})
        return model(tokens, attention_masks=masks, positions=positions)
    return run


@pytest.mark.parametrize("backend,leaks_causal,leaks_cross", [
    ("bf16-reference", False, False), ("flamia-mxfp8", False, False),
    ("flamia-nvfp4_fp8", False, False), ("flamia-fp8_tensorwise", True, True),
    ("sdpa", False, True),  # torchtitan's sdpa is causal per row: it mixes packed documents
])
def test_model_level_probes(backend, leaks_causal, leaks_cross):
    from flamia.probes import model_causal_probe, model_cross_document_probe

    B, L = 2, 128
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, 63, (B, L), generator=g)
    positions = torch.cat([torch.arange(40), torch.arange(88), torch.arange(L)]).reshape(B, L)
    fn = _logits_fn(_model(backend), positions)
    causal = model_causal_probe(fn, tokens, [(0, 30), (0, 100), (1, 64)], 64, replacement=63)
    cross = model_cross_document_probe(fn, tokens, [(0, 0, 40)], 64, replacement=63)
    assert (causal.max_abs_delta > 0) == leaks_causal, str(causal)
    assert (cross.max_abs_delta > 0) == leaks_cross, str(cross)


@pytest.mark.parametrize("config", sorted(f for f in os.listdir(os.path.join(REPO, "configs"))
                                          if f.endswith(".toml")))
def test_shipped_configs_parse_and_validate(config):
    from torchtitan.config import ConfigManager

    from train.titan import validate_job_config

    cfg = ConfigManager().parse_args(["--job.config_file", os.path.join(REPO, "configs", config)])
    validate_job_config(cfg)
    assert cfg.model.name == "flamia_llama3" and cfg.job.custom_config_module == "train.titan"
