"""The trainer on CPU: a 2-process torchrun job through the real entry point, resume equality,
config validation, and model-level leakage probes on the torchtitan model."""

import json
import math
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


def records(folder):
    with open(os.path.join(folder, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


DOCUMENTED_KEYS = {"step", "loss", "max_loss", "grad_norm", "tokens_per_s", "mfu_pct",
                   "memory_gib", "time", "lr", "grad/max_abs", "grad/nonfinite_count",
                   "grad_norm/attn_q", "grad_norm/attn_k", "grad_norm/attn_v", "grad_norm/attn_o",
                   "grad_norm/mlp", "grad_norm/norm", "grad_norm/embedding", "grad_norm/output",
                   "grad_norm/layer_00", "update_ratio/attn_q", "update_ratio/mlp"}


@pytest.fixture(scope="module")
def debug_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("debug_run")
    proc = torchrun(folder, "--training.steps", "20")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return folder


def test_two_process_training_loss_goes_down(debug_run):
    loss = losses(debug_run)
    assert sorted(loss) == list(range(1, 21))
    first, last = sum(loss[s] for s in (1, 2, 3)) / 3, sum(loss[s] for s in (18, 19, 20)) / 3
    assert last < first - 1.0, f"loss did not go down enough: {first:.3f} -> {last:.3f}"


def test_metrics_records_have_documented_keys_and_sane_values(debug_run):
    recs = records(debug_run)
    for r in recs:
        missing = DOCUMENTED_KEYS - set(r)
        assert not missing, f"step {r['step']}: missing {sorted(missing)}"
        assert r["grad/nonfinite_count"] == 0 and r["grad/max_abs"] > 0
        assert r["tokens_per_s"] > 0 and r["memory_gib"] > 0
        assert 0 < r["update_ratio/attn_q"] < 1
        # the group norms compose the total (before clipping): sum of squares over kinds
        kinds = ("attn_q", "attn_k", "attn_v", "attn_o", "mlp", "norm", "embedding", "output")
        total = sum(r[f"grad_norm/{k}"] ** 2 for k in kinds) ** 0.5
        assert abs(total - r["grad_norm"]) < 1e-3 * r["grad_norm"]
    probes = [r for r in recs if "probe/causal_max_abs_delta" in r]
    assert [r["step"] for r in probes] == [5, 10, 15, 20]
    for r in probes:  # bf16-reference: exactly 0
        assert r["probe/causal_max_abs_delta"] == 0.0
        assert r["probe/cross_document_max_abs_delta"] == 0.0
        for layer in ("00", "01"):  # attention statistics on the probe batch
            assert 0 < r[f"attn/layer_{layer}/max_abs_q"] < 1e4
            assert r[f"attn/layer_{layer}/scale_exp_min"] <= r[f"attn/layer_{layer}/scale_exp_max"]
            assert 0 < r[f"attn/layer_{layer}/entropy"] < 6.3  # < log(seq_len = 256) + margin
        assert not any(k.startswith("shadow/") for k in r), "bf16 has no FP8 shadow"
    with open(os.path.join(debug_run, "run.json")) as f:
        info = json.load(f)
    assert info["attention"] == "bf16-reference" and info["recipe"] == "bf16"
    assert info["config"]["flamia"]["attention"] == "bf16-reference"


def test_in_training_probe_catches_leaky_control_and_compare_report(tmp_path, debug_run):
    leaky = tmp_path / "leaky"
    proc = torchrun(leaky, "--training.steps", "10", "--flamia.attention",
                    "flamia-fp8_tensorwise", "--flamia.allow_leaky_attention", nproc=1)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "LEAKAGE PROBE NON-ZERO" in proc.stderr + proc.stdout
    probes = [r for r in records(leaky) if "probe/cross_document_max_abs_delta" in r]
    assert probes and max(r["probe/cross_document_max_abs_delta"] for r in probes) > 0
    out = tmp_path / "report.png"
    done = subprocess.run([sys.executable, "-m", "train.compare", str(debug_run), str(leaky),
                           "--out", str(out), "--smooth", "3", "--tail", "3"], cwd=REPO,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert out.stat().st_size > 10_000
    md = (tmp_path / "report.md").read_text()
    assert "gap vs bf16" in md and "Leakage probes non-zero in: leaky" in md


@pytest.mark.parametrize("policy", ["skip", "stop"])
def test_nonfinite_guard(tmp_path, policy):
    proc = torchrun(tmp_path, "--training.steps", "5", "--flamia.inject_nan_step", "3",
                    "--flamia.nonfinite_policy", policy, "--flamia.probe_freq", "0", nproc=1)
    text = proc.stderr + proc.stdout
    assert "non-finite gradient norm at step 3" in text
    if policy == "skip":
        assert proc.returncode == 0, text[-3000:]
        recs = {r["step"]: r for r in records(tmp_path)}
        assert sorted(recs) == [1, 2, 3, 4, 5]
        assert recs[3]["skipped_steps"] == 1 and recs[3]["grad/nonfinite_count"] > 0
        assert all(math.isfinite(recs[s]["loss"]) for s in (4, 5))
    else:
        assert proc.returncode != 0
        assert "stopping" in text


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
    proc = torchrun(tmp_path, "--training.steps", "5", "--flamia.attention", "flamia-mxfp8",
                    nproc=1)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "LEAKAGE PROBE NON-ZERO" not in proc.stderr + proc.stdout
    assert all(torch.isfinite(torch.tensor(v)) for v in losses(tmp_path).values())
    last = records(tmp_path)[-1]
    assert last["probe/causal_max_abs_delta"] == 0.0
    assert last["probe/cross_document_max_abs_delta"] == 0.0
    for name in ("O", "dQ", "dK", "dV"):  # FP8 vs BF16 on the same activations: a few percent
        assert 1e-3 < last[f"shadow/layer_00/rel_err_{name}"] < 0.2


@pytest.mark.parametrize("args,message", [
    (["--flamia.attention", "fastest"], "unknown attention backend"),
    (["--training.seq_len", "250"], "multiple of 64"),
    (["--flamia.corpus", "/nonexistent/corpus.jsonl"], "neither an embedded corpus"),
    (["--flamia.attention", "flamia-fp8_tensorwise"], "leaky control recipe"),
    (["--model.flavor", "7B"], "unknown model.flavor"),
    pytest.param(["--flamia.attention", "flex"], "trains on CUDA only",
                 marks=pytest.mark.skipif(torch.cuda.is_available(), reason="CPU-only rule")),
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
    args.attn_type = backend if backend in ("sdpa", "flex") else "varlen"
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
    ("flamia-nvfp4_fp8", False, False), ("flamia-fp8_rowwise", False, False),
    ("flamia-fp8_tensorwise", True, True),
    ("sdpa", False, True),  # torchtitan's sdpa is causal per row: it mixes packed documents
    ("flex", False, False),  # torchtitan's flex with our document mask from positions
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


def test_wandb_offline_run(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    proc = torchrun(tmp_path, "--training.steps", "2", "--metrics.enable_wandb",
                    "--flamia.experiment", "exp-test", "--flamia.probe_freq", "0", nproc=1)
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = [d for d, _, _ in os.walk(tmp_path) if os.path.basename(d).startswith("offline-run-")]
    assert runs, "no offline wandb run written"
