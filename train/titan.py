"""Everything specific to torchtitan 0.2.2 lives here (and nowhere else in the project).

Extension points used (no fork, no copy of torchtitan code):
- ``job.custom_config_module = "train.titan"``: the ``[flamia]`` section of the job config
  (``JobConfig`` below is merged into torchtitan's).
- ``register_train_spec("flamia_llama3", ...)``: torchtitan's Llama3 ``Transformer`` subclassed
  only to pick the attention backend and to build the varlen metadata from ``positions``; the
  rest of the train spec is torchtitan's own (parallelize_llama with FSDP2, optimizers, LR
  schedule, cross-entropy loss).
- tokenizer: torchtitan's ``HuggingFaceTokenizer`` on the project's tokenizer directory.
- dataloader: ``data.packing.PackedLoader`` behind torchtitan's ``BaseDataLoader`` interface,
  its state in torchtitan's checkpoint (one entry per data-parallel rank).
- ``FlamiaTrainer``: torchtitan's ``Trainer`` with configuration checks before any compute.
- CPU support (section at the end): torchtitan 0.2.2 picks "cuda" as its device when no
  accelerator is present; ``enable_cpu()`` points it at the CPU with gloo.
"""

# no "from __future__ import annotations": tyro resolves the [flamia] section's types at run time

import json
import os
import pickle
import resource
import time
from dataclasses import dataclass, field

import torch

from data.packing import PackedLoader, cu_seqlens_from_positions, max_seqlen_from_cu_seqlens
from data.shards import Shards, build_shards
from data.sources import EMBEDDED
from data.tokenizer import train_tokenizer
from model.attention import (
    FLAMIA_BACKENDS, LEAKY_BACKENDS, PackedDocumentAttention, check_backend,
)
from train.observe import (
    SpikeDetector, UpdateRatio, attention_statistics, gradient_statistics, leakage_probes,
)

import torchtitan.components.metrics as tt_metrics
import torchtitan.distributed.parallel_dims as tt_parallel_dims
import torchtitan.distributed.utils as tt_dist_utils
import torchtitan.tools.utils as tt_utils
from torchtitan.components.dataloader import BaseDataLoader
from torchtitan.components.loss import build_cross_entropy_loss
from torchtitan.components.lr_scheduler import build_lr_schedulers
from torchtitan.components.optimizer import build_optimizers
from torchtitan.components.tokenizer import HuggingFaceTokenizer
from torchtitan.models.attention import VarlenMetadata
from torchtitan.models.llama3 import Transformer, TransformerModelArgs, parallelize_llama
from torchtitan.protocols.train_spec import TrainSpec, register_train_spec
from torchtitan.tools.logging import logger as tt_logger
from torchtitan.train import Trainer

MODEL_NAME = "flamia_llama3"
SEQ_LEN_MULTIPLE = 64


# ------------------------------------------------------------------------------------------
# The [flamia] config section
# ------------------------------------------------------------------------------------------


@dataclass
class Flamia:
    attention: str = "bf16-reference"
    """Attention backend (model.attention.BACKENDS): bf16-reference, flamia-bf16, flamia-mxfp8,
    flamia-nvfp4_fp8, flamia-fp8_rowwise, or torchtitan's sdpa / flex / varlen."""
    corpus: str = "python-docs"
    """Embedded corpus (python-docs, linux, default), a local file/dir/glob, or hf:NAME."""
    tokenizer_corpus: str = ""
    """Corpus the BPE is trained on (default: corpus; for local data, python-docs)."""
    vocab_size: int = 8192
    tokenizer_docs: int = 20000
    """Documents the tokenizer is trained on (the first ones of tokenizer_corpus)."""
    max_docs: int = 0
    """Use only the first max_docs documents (0: all)."""
    allow_leaky_attention: bool = False
    """The leaky control recipes exist for the probes; training with one needs this flag."""
    probe_freq: int = 50
    """Run the model-level leakage probes every probe_freq steps (0: never)."""
    grad_stats: bool = True
    """Per-group gradient norms, max |grad|, non-finite count, update/weight ratios, on log steps."""
    nonfinite_policy: str = "skip"
    """A non-finite gradient norm: "skip" the optimizer step (counted, logged) or "stop"."""
    spike_window: int = 50
    spike_zscore: float = 6.0
    experiment: str = ""
    """Experiment (wandb group): BF16 and FLAMIA runs of one experiment share it."""
    inject_nan_step: int = 0
    """Testing aid: make the loss NaN at this step (0: never)."""


@dataclass
class JobConfig:
    flamia: Flamia = field(default_factory=Flamia)


# ------------------------------------------------------------------------------------------
# Model
# ------------------------------------------------------------------------------------------


@dataclass
class FlamiaModelArgs(TransformerModelArgs):
    attention_backend: str = "bf16-reference"

    def update_from_config(self, job_config, **kwargs) -> None:
        super().update_from_config(job_config, **kwargs)
        cfg = job_config.flamia
        self.vocab_size = cfg.vocab_size
        self.attention_backend = cfg.attention
        # flamia backends ride on torchtitan's varlen code path (packed [B*L, H, D] operands and
        # cu_seqlens); sdpa / flex / varlen are torchtitan's own.
        self.attn_type = "varlen" if cfg.attention in FLAMIA_BACKENDS else cfg.attention
        self.attn_mask_type = "causal" if cfg.attention == "sdpa" else "block_causal"


def _flavor(dim, n_layers, n_heads, n_kv_heads, multiple_of=256):
    return FlamiaModelArgs(dim=dim, n_layers=n_layers, n_heads=n_heads, n_kv_heads=n_kv_heads,
                           multiple_of=multiple_of, rope_theta=500000, vocab_size=8192)


# head dim = dim / n_heads: 64 for debug/50M/125M, 128 for 350M/1B; all use GQA.
FLAVORS = {
    "debug": _flavor(128, 2, 2, 1, multiple_of=32),
    "50M": _flavor(512, 8, 8, 4),
    "125M": _flavor(768, 12, 12, 4),
    "350M": _flavor(1024, 24, 8, 2),
    "1B": _flavor(2048, 16, 16, 4),
}


class FlamiaTransformer(Transformer):
    """torchtitan's Llama3 with the attention backend of ``model_args.attention_backend``."""

    def __init__(self, model_args: FlamiaModelArgs):
        super().__init__(model_args)
        if model_args.attention_backend in FLAMIA_BACKENDS:
            for layer in self.layers.values():
                layer.attention.inner_attention = _VarlenToFlamia(model_args.attention_backend)

    def get_attention_masks(self, input_batch, tokenizer, extra_inputs=None):
        """Document structure from ``positions`` (every segment starts at position 0), not from
        EOS tokens: our rows never carry EOS as an input."""
        if extra_inputs is None or "positions" not in extra_inputs:
            raise ValueError("flamia_llama3 needs the dataloader's 'positions' to find documents")
        positions = extra_inputs["positions"]
        if self.model_args.attn_type == "flex":
            return _flex_document_mask(positions)
        cu = cu_seqlens_from_positions(positions)
        max_len = max_seqlen_from_cu_seqlens(cu)
        return VarlenMetadata(cu_seq_q=cu, cu_seq_k=cu, max_q=max_len, max_k=max_len)


class _VarlenToFlamia(torch.nn.Module):
    """Takes the place of torchtitan's VarlenAttentionWrapper: same call, flamia inside."""

    def __init__(self, backend: str):
        super().__init__()
        self.attn = PackedDocumentAttention(backend)

    def forward(self, xq, xk, xv, attention_masks: VarlenMetadata, scale=None):
        # [B, H, L, D] -> packed [B*L, H, D], as torchtitan's varlen wrapper does
        pack = lambda t: t.transpose(1, 2).flatten(0, 1)
        return self.attn(pack(xq), pack(xk), pack(xv), attention_masks.cu_seq_q,
                         attention_masks.max_q)


def _flex_document_mask(positions):
    from torchtitan.models.attention import create_attention_mask

    doc = torch.cumsum((positions == 0).to(torch.int32), dim=1)  # [B, L] document index per row

    def mask_mod(b, h, q_idx, kv_idx):
        return (doc[b, q_idx] == doc[b, kv_idx]) & (kv_idx <= q_idx)

    B, L = positions.shape
    return create_attention_mask(mask_mod, B, None, L, L)


# ------------------------------------------------------------------------------------------
# Metrics: torchtitan's sinks (console, TensorBoard, wandb) plus a JSONL record per logged step
# ------------------------------------------------------------------------------------------


class FlamiaMetricsProcessor(tt_metrics.MetricsProcessor):
    """Adds <dump_folder>/metrics.jsonl (global rank 0): one JSON object per logged step with the
    exact values (floats as Python reprs) - see README "Metrics" for the schema."""

    def __init__(self, job_config, parallel_dims, tag=None):
        super().__init__(job_config, parallel_dims, tag)
        self.flamia_extra = {}  # filled by FlamiaTrainer (gradient statistics, probes, guards)
        self.spikes = None  # a train.observe.SpikeDetector, set by FlamiaTrainer
        self.jsonl_path = None
        if not torch.distributed.is_initialized() or torch.distributed.get_rank() == 0:
            os.makedirs(job_config.job.dump_folder, exist_ok=True)
            self.jsonl_path = os.path.join(job_config.job.dump_folder, "metrics.jsonl")

    def log(self, step, global_avg_loss, global_max_loss, grad_norm, extra_metrics=None):
        tokens = self.ntokens_since_last_log
        elapsed = time.perf_counter() - self.time_last_log
        extra_metrics = {**(extra_metrics or {}), **self.flamia_extra}
        self.flamia_extra = {}
        if self.spikes is not None:
            extra_metrics.update(self.spikes.update(float(global_avg_loss)))
        super().log(step, global_avg_loss, global_max_loss, grad_norm, extra_metrics)
        if self.jsonl_path is None:
            return
        record = {"step": step, "loss": float(global_avg_loss),
                  "max_loss": float(global_max_loss), "grad_norm": float(grad_norm),
                  "tokens_per_s": tokens / elapsed if elapsed > 0 else None,
                  "mfu_pct": (100 * self.num_flops_per_token * tokens / elapsed
                              / self.gpu_peak_flops if elapsed > 0 else None),
                  "memory_gib": self.device_memory_monitor.get_peak_stats().max_reserved_gib,
                  "time": time.time(), **extra_metrics}
        with open(self.jsonl_path, "a") as f:
            f.write(json.dumps(record) + "\n")


def build_flamia_metrics_processor(job_config, parallel_dims, model_args=None, tag=None):
    return FlamiaMetricsProcessor(job_config, parallel_dims, tag)


# ------------------------------------------------------------------------------------------
# Tokenizer and data
# ------------------------------------------------------------------------------------------


def _tokenizer_corpus(cfg: Flamia) -> str:
    if cfg.tokenizer_corpus:
        return cfg.tokenizer_corpus
    return cfg.corpus if cfg.corpus in ("python-docs", "linux") else "python-docs"


def tokenizer_path(job_config) -> str:
    cfg = job_config.flamia
    return str(train_tokenizer(_tokenizer_corpus(cfg), cfg.vocab_size, cfg.tokenizer_docs))


def build_flamia_tokenizer(job_config, **kwargs) -> HuggingFaceTokenizer:
    return HuggingFaceTokenizer(tokenizer_path(job_config))


class FlamiaDataLoader(BaseDataLoader):
    """(input_dict, labels) batches for torchtitan's trainer; stateful per data-parallel rank."""

    def __init__(self, loader: PackedLoader):
        self.loader = loader
        self._rank_key = f"dp_rank_{loader.rank}"

    def __iter__(self):
        while True:
            b = self.loader.next_batch()
            yield {"input": b["input_ids"], "positions": b["positions"]}, b["labels"]

    def state_dict(self):
        return {self._rank_key: pickle.dumps(self.loader.state_dict()),
                "world_size": self.loader.world_size}

    def load_state_dict(self, state_dict):
        if not state_dict:
            return
        if self._rank_key not in state_dict:
            raise ValueError(f"the checkpoint has no dataloader state for {self._rank_key}: it "
                             f"was saved with another data-parallel world size "
                             f"({state_dict.get('world_size')})")
        self.loader.load_state_dict(pickle.loads(state_dict[self._rank_key]))


def build_flamia_dataloader(dp_world_size, dp_rank, tokenizer, job_config, **kwargs):
    cfg = job_config.flamia
    shards = Shards(build_shards(cfg.corpus, tokenizer_path(job_config),
                                 max_docs=cfg.max_docs or None))
    loader = PackedLoader(shards, job_config.training.seq_len,
                          job_config.training.local_batch_size, rank=dp_rank,
                          world_size=dp_world_size, seed=job_config.debug.seed or 0)
    return FlamiaDataLoader(loader)


def parallelize(model, parallel_dims, job_config, **kwargs):
    """torchtitan's parallelize_llama; on the CPU, FSDP's gradient reduce-scatter with gloo."""
    model = parallelize_llama(model, parallel_dims, job_config, **kwargs)
    if _CPU_ENABLED:
        from torch.distributed.fsdp import FSDPModule

        for m in model.modules():
            if isinstance(m, FSDPModule):
                # torchtitan sets a divide factor of 1, which FSDP turns into PREMUL_SUM: gloo has
                # no PREMUL_SUM, a plain SUM is the same reduction here.
                m.set_force_sum_reduction_for_comms(True)
    return model


register_train_spec(MODEL_NAME, TrainSpec(
    model_cls=FlamiaTransformer,
    model_args=FLAVORS,
    parallelize_fn=parallelize,
    pipelining_fn=None,
    build_optimizers_fn=build_optimizers,
    build_lr_schedulers_fn=build_lr_schedulers,
    build_dataloader_fn=build_flamia_dataloader,
    build_tokenizer_fn=build_flamia_tokenizer,
    build_loss_fn=build_cross_entropy_loss,
    build_metrics_processor_fn=build_flamia_metrics_processor,
))


# ------------------------------------------------------------------------------------------
# Configuration checks: one clear sentence, before any compute
# ------------------------------------------------------------------------------------------


def validate_job_config(job_config) -> None:
    cfg = job_config.flamia
    if job_config.model.name != MODEL_NAME:
        raise ValueError(f"model.name must be {MODEL_NAME!r} for this trainer, got "
                         f"{job_config.model.name!r}")
    if job_config.model.flavor not in FLAVORS:
        raise ValueError(f"unknown model.flavor {job_config.model.flavor!r}; accepted: "
                         f"{', '.join(FLAVORS)}")
    args = FLAVORS[job_config.model.flavor]
    check_backend(cfg.attention, args.dim // args.n_heads)
    if cfg.attention in LEAKY_BACKENDS and cfg.attention != "sdpa" and not cfg.allow_leaky_attention:
        raise ValueError(f"attention backend {cfg.attention!r} is a leaky control recipe (for "
                         f"the probes); set flamia.allow_leaky_attention = true to train with it")
    seq_len = job_config.training.seq_len
    if cfg.attention in FLAMIA_BACKENDS and seq_len % SEQ_LEN_MULTIPLE:
        raise ValueError(f"training.seq_len={seq_len} must be a multiple of {SEQ_LEN_MULTIPLE} "
                         f"for the flamia backends (rows start on the kernels' tile grid)")
    if cfg.attention in ("flex", "varlen") and not torch.cuda.is_available():
        raise ValueError(f"attention backend {cfg.attention!r} trains on CUDA only (torch has no "
                         f"CPU backward for it); on a CPU use bf16-reference or a flamia backend")
    if cfg.attention == "flex" and seq_len % 128:
        raise ValueError(f"training.seq_len={seq_len} must be a multiple of 128 for flex "
                         f"attention (its block size)")
    if cfg.vocab_size < 300:
        raise ValueError(f"flamia.vocab_size must be >= 300, got {cfg.vocab_size}")
    corpus = cfg.corpus
    if corpus not in EMBEDDED and not corpus.startswith("hf:"):
        import glob

        if not glob.glob(corpus) and not os.path.exists(corpus):
            raise FileNotFoundError(f"flamia.corpus {corpus!r} is neither an embedded corpus "
                                    f"({', '.join(EMBEDDED)}) nor an existing file, directory "
                                    f"or glob")
    if cfg.nonfinite_policy not in ("skip", "stop"):
        raise ValueError(f"flamia.nonfinite_policy must be 'skip' or 'stop', got "
                         f"{cfg.nonfinite_policy!r}")
    tp = cfg.tokenizer_corpus
    if tp and tp not in EMBEDDED and not os.path.exists(tp):
        raise FileNotFoundError(f"flamia.tokenizer_corpus {tp!r} does not exist")


class FlamiaTrainer(Trainer):
    """torchtitan's Trainer plus: config checks first; gradient statistics and the non-finite
    guard around torchtitan's gradient clipping and optimizer step; loss-spike detection;
    in-training leakage probes; run.json (resolved config) and wandb grouping."""

    def __init__(self, job_config):
        validate_job_config(job_config)
        cfg = job_config.flamia
        run_name = job_config.job.description
        # wandb (through torchtitan's logger) reads these when the metrics processor is built
        os.environ.setdefault("WANDB_RUN_GROUP", cfg.experiment or run_name)
        os.environ.setdefault("WANDB_RUN_NAME", run_name)
        os.environ.setdefault("WANDB_PROJECT", "flamia")
        super().__init__(job_config)
        self.skipped_steps = 0
        self._log_step = False
        self.metrics_processor.spikes = SpikeDetector(cfg.spike_window, cfg.spike_zscore)
        self._install_gradient_hooks()
        self._probe_batch = self._build_probe_batch() if cfg.probe_freq else None
        if torch.distributed.get_rank() == 0:
            os.makedirs(job_config.job.dump_folder, exist_ok=True)
            info = {"name": run_name, "attention": cfg.attention,
                    "recipe": FLAMIA_BACKENDS.get(cfg.attention, (cfg.attention,))[0],
                    "experiment": cfg.experiment or run_name, "seed": job_config.debug.seed,
                    "config": job_config.to_dict()}
            with open(os.path.join(job_config.job.dump_folder, "run.json"), "w") as f:
                json.dump(info, f, indent=1, default=str)

    # -- gradients: statistics before clipping, non-finite guard, update ratios ------------
    def _install_gradient_hooks(self):
        cfg = self.job_config.flamia
        original_clip = tt_dist_utils.clip_grad_norm_
        trainer = self

        def clip_with_statistics(parameters, *args, **kwargs):
            parameters = list(parameters)
            if cfg.inject_nan_step and trainer.step == cfg.inject_nan_step:
                for p in parameters:  # the testing aid of flamia.inject_nan_step
                    if p.grad is not None:
                        p.grad.fill_(float("nan"))
                        break
            if trainer._log_step and cfg.grad_stats:
                named = [(n, p) for m in trainer.model_parts for n, p in m.named_parameters()]
                trainer.metrics_processor.flamia_extra.update(gradient_statistics(named))
            total = original_clip(parameters, *args, **kwargs)
            trainer._nonfinite = not torch.isfinite(total).item()
            return total

        tt_dist_utils.clip_grad_norm_ = clip_with_statistics
        optimizer_step = self.optimizers.step

        def guarded_step(*args, **kwargs):
            if self._nonfinite:
                self.skipped_steps += 1
                self.metrics_processor.flamia_extra["skipped_steps"] = self.skipped_steps
                msg = (f"non-finite gradient norm at step {self.step} "
                       f"(policy {cfg.nonfinite_policy!r}, {self.skipped_steps} so far)")
                if cfg.nonfinite_policy == "stop":
                    raise RuntimeError(msg + ": stopping; set flamia.nonfinite_policy = "
                                       "\"skip\" to skip such steps instead")
                tt_logger.warning(msg + ": optimizer step skipped")
                return None
            ratio = None
            if self._log_step and cfg.grad_stats:
                ratio = UpdateRatio([(n, p) for m in self.model_parts
                                     for n, p in m.named_parameters()])
            out = optimizer_step(*args, **kwargs)
            if ratio is not None:
                self.metrics_processor.flamia_extra.update(ratio.finish())
            return out

        self.optimizers.step = guarded_step
        self._nonfinite = False

    # -- leakage probes ------------------------------------------------------------------
    def _build_probe_batch(self):
        """A held-out packed batch (2 rows, another seed than training), per rank."""
        shards = self.dataloader.loader.shards
        loader = PackedLoader(shards, self.job_config.training.seq_len, 2,
                              rank=self.dataloader.loader.rank,
                              world_size=self.dataloader.loader.world_size,
                              seed=(self.job_config.debug.seed or 0) + 1_000_003)
        b = loader.next_batch()
        keep = [self.tokenizer.bos_id] if self.tokenizer is not None else []
        return b["input_ids"].to(self.device), b["positions"].to(self.device), keep

    def run_probes(self) -> dict:
        tokens, positions, keep = self._probe_batch
        model = self.model_parts[0]

        def logits(tok):
            masks = None
            if self.model_args.attn_type != "sdpa":
                masks = model.get_attention_masks(tok, self.tokenizer, {"positions": positions})
            return model(tok, attention_masks=masks, positions=positions)

        attn_layers = [(i, m) for i, m in enumerate(m for m in model.modules()
                                                       if isinstance(m, PackedDocumentAttention))]
        for _, m in attn_layers:
            m.record = True
        result = leakage_probes(logits, tokens, positions, self.model_args.vocab_size, keep)
        if attn_layers:  # recorded on the probes' first (unperturbed) forward
            result.update(attention_statistics(attn_layers))
        leaked = {k: v for k, v in result.items() if k.startswith("probe/") and v != 0.0}
        if leaked:
            tt_logger.warning(f"LEAKAGE PROBE NON-ZERO at step {self.step} with attention "
                              f"{self.job_config.flamia.attention!r}: {leaked}")
        return result

    def train_step(self, data_iterator):
        self._log_step = self.metrics_processor.should_log(self.step)
        cfg = self.job_config.flamia
        if cfg.probe_freq and self.step % cfg.probe_freq == 0 and self._log_step:
            self.metrics_processor.flamia_extra.update(self.run_probes())
        super().train_step(data_iterator)


# ------------------------------------------------------------------------------------------
# CPU support: torchtitan 0.2.2 falls back to "cuda" when no accelerator is present
# ------------------------------------------------------------------------------------------


class _CpuMemoryMonitor(tt_metrics.DeviceMemoryMonitor):
    """Peak resident memory of the process in place of the CUDA allocator statistics."""

    def __init__(self):
        self.device = torch.device("cpu")
        self.device_name = "cpu"
        self.device_capacity = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        self.device_capacity_gib = self._to_gib(self.device_capacity)

    def get_peak_stats(self):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        return tt_metrics.DeviceMemStats(self._to_gib(peak), self._to_pct(peak),
                                         self._to_gib(peak), self._to_pct(peak), 0, 0)

    def reset_peak_stats(self):
        pass


class _CpuDeviceModule:
    """torch.cpu, with the CUDA-module calls torchtitan makes: an integer current device (for
    barrier device ids) and no-op cache / peak-statistics resets."""

    def __getattr__(self, name):
        return getattr(torch.cpu, name)

    @staticmethod
    def current_device() -> int:
        return 0

    @staticmethod
    def empty_cache() -> None:
        pass

    @staticmethod
    def reset_peak_memory_stats() -> None:
        pass


_CPU_ENABLED = False


def enable_cpu() -> None:
    """Run torchtitan on the CPU: device "cpu", process group gloo, CPU memory statistics."""
    global _CPU_ENABLED
    _CPU_ENABLED = True
    for mod in (tt_utils, tt_metrics, tt_dist_utils):
        mod.device_type, mod.device_module = "cpu", _CpuDeviceModule()
    tt_parallel_dims.device_type = "cpu"
    tt_metrics.build_device_memory_monitor = _CpuMemoryMonitor
