"""Training observability that does not depend on torchtitan: gradient statistics, update-to-
weight ratios, loss-spike detection, in-training leakage probes. ``train/titan.py`` wires them
into torchtitan's trainer.

Parameter groups (by parameter name of torchtitan's Llama): attn_q, attn_k, attn_v, attn_o,
mlp, norm, embedding, output; and per layer: layer_<i>. Statistics are computed on each rank's
local shard (FSDP2 DTensors) and all-reduced, so every rank holds the global values.
"""

import math
import re
from collections import deque

import torch
import torch.distributed as dist

import flamia
from flamia.formats import E4M3, e8m0_exponent
from flamia.probes import model_causal_probe, model_cross_document_probe
from flamia.reference import document_causal_mask

_GROUP_RULES = (
    (re.compile(r"attention\.wq\."), "attn_q"),
    (re.compile(r"attention\.wk\."), "attn_k"),
    (re.compile(r"attention\.wv\."), "attn_v"),
    (re.compile(r"attention\.wo\."), "attn_o"),
    (re.compile(r"feed_forward\."), "mlp"),
    (re.compile(r"norm\."), "norm"),
    (re.compile(r"tok_embeddings\."), "embedding"),
    (re.compile(r"^output\."), "output"),
)
_LAYER = re.compile(r"layers\.(\d+)\.")


def param_groups(name: str) -> list[str]:
    """The statistic groups a parameter belongs to (its kind, and its layer if any)."""
    name = name.replace("_orig_mod.", "").replace("_checkpoint_wrapped_module.", "")
    groups = [g for rx, g in _GROUP_RULES if rx.search(name)][:1] or ["other"]
    layer = _LAYER.search(name)
    if layer:
        groups.append(f"layer_{int(layer.group(1)):02d}")
    return groups


def _local(t: torch.Tensor) -> torch.Tensor:
    return t.to_local() if hasattr(t, "to_local") else t


def _all_reduce(t: torch.Tensor, op) -> torch.Tensor:
    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.all_reduce(t, op=op)
    return t


def gradient_statistics(named_params) -> dict[str, float]:
    """Per-group gradient norms, max |grad| and the count of non-finite gradient entries.

    Must be called on every rank (collectives)."""
    named = [(n, p) for n, p in named_params if p.grad is not None]
    groups = sorted({g for n, _ in named for g in param_groups(n)})
    index = {g: i for i, g in enumerate(groups)}
    device = _local(named[0][1].grad).device if named else torch.device("cpu")
    sumsq = torch.zeros(len(groups) + 1, dtype=torch.float64, device=device)  # last: non-finite
    amax = torch.zeros(1, dtype=torch.float64, device=device)
    for name, p in named:
        g = _local(p.grad).detach()
        finite = torch.isfinite(g)
        sumsq[-1] += (~finite).sum()
        gf = torch.where(finite, g, torch.zeros_like(g)).double()
        sq = gf.square().sum()
        for grp in param_groups(name):
            sumsq[index[grp]] += sq
        if gf.numel():
            amax[0] = torch.maximum(amax[0], gf.abs().max())
    _all_reduce(sumsq, dist.ReduceOp.SUM)
    _all_reduce(amax, dist.ReduceOp.MAX)
    out = {f"grad_norm/{g}": math.sqrt(sumsq[i].item()) for g, i in index.items()}
    out["grad/max_abs"] = amax.item()
    out["grad/nonfinite_count"] = int(sumsq[-1].item())
    return out


class UpdateRatio:
    """||w_after - w_before|| / ||w_before|| per group around one optimizer step."""

    def __init__(self, named_params):
        self.named = [(n, p) for n, p in named_params]
        self.before = [_local(p.detach()).clone() for _, p in self.named]

    def finish(self) -> dict[str, float]:
        groups = sorted({g for n, _ in self.named for g in param_groups(n)})
        index = {g: i for i, g in enumerate(groups)}
        device = self.before[0].device if self.before else torch.device("cpu")
        acc = torch.zeros(2, len(groups), dtype=torch.float64, device=device)
        for (name, p), w0 in zip(self.named, self.before):
            d = (_local(p.detach()).double() - w0.double()).square().sum()
            w = w0.double().square().sum()
            for g in param_groups(name):
                acc[0, index[g]] += d
                acc[1, index[g]] += w
        _all_reduce(acc, dist.ReduceOp.SUM)
        return {f"update_ratio/{g}": math.sqrt(acc[0, i].item() / max(acc[1, i].item(), 1e-300))
                for g, i in index.items()}


class SpikeDetector:
    """z-score of the loss against the previous ``window`` logged losses."""

    def __init__(self, window: int = 50, threshold: float = 6.0):
        self.history = deque(maxlen=window)
        self.threshold = threshold

    def update(self, loss: float) -> dict[str, float]:
        out = {}
        if len(self.history) >= 5 and math.isfinite(loss):
            mean = sum(self.history) / len(self.history)
            var = sum((x - mean) ** 2 for x in self.history) / (len(self.history) - 1)
            z = (loss - mean) / math.sqrt(var) if var > 0 else 0.0
            out = {"loss_zscore": z, "loss_spike": int(z > self.threshold)}
        if math.isfinite(loss):
            self.history.append(loss)
        return out


def leakage_probes(logits_fn, tokens: torch.Tensor, positions: torch.Tensor, vocab_size: int,
                   keep=()) -> dict[str, float]:
    """Model-level causal and cross-document probes on one packed batch (bitwise).

    Causal: the last token of the longest segment of row 0 is changed; logits before it must not
    move. Cross-document: every token of the first segment of row 0 is changed; logits of every
    other position must not move. Returns the largest |delta| of each (0.0 is a pass), reduced
    with MAX over ranks (each rank probes its own batch; all must call this together)."""
    starts = (positions[0] == 0).nonzero().flatten().tolist() + [positions.shape[1]]
    segs = list(zip(starts[:-1], starts[1:]))
    s, e = max(segs, key=lambda se: se[1] - se[0])
    causal = model_causal_probe(logits_fn, tokens, [(0, e - 1)], vocab_size, keep)
    first = segs[0]
    cross = model_cross_document_probe(logits_fn, tokens, [(0, first[0], first[1])], vocab_size,
                                       keep)
    vals = torch.tensor([causal.max_abs_delta, cross.max_abs_delta], dtype=torch.float64,
                        device=tokens.device)
    _all_reduce(vals, dist.ReduceOp.MAX)
    return {"probe/causal_max_abs_delta": vals[0].item(),
            "probe/cross_document_max_abs_delta": vals[1].item()}


def _entropy(q, k, cu_seqlens, scale) -> float:
    """Mean softmax entropy (nats) over queries and heads, exact fp32, a few heads at a time."""
    total, hq, _ = q.shape
    group = hq // k.shape[1]
    mask = document_causal_mask(cu_seqlens, total)
    acc, n = 0.0, 0
    for h in range(hq):
        s = (q[:, h].float() @ k[:, h // group].float().T) * scale
        p = torch.softmax(s.masked_fill(~mask, float("-inf")), dim=-1)
        acc += -(p * torch.log(p.clamp_min(1e-30))).sum().item()
        n += total
    return acc / n


def attention_statistics(layers, shadow: bool = True) -> dict[str, float]:
    """Per layer: max |q|, |k|, |v|; range of the per-(token, head) E8M0 exponents the mxfp8
    recipe would pick for q, k, v; mean softmax entropy; and, for an FP8 recipe, the shadow
    error: relative L2 error of the layer's attention (O, dQ, dK, dV) against the bf16 recipe on
    the same activations and a fixed random dO. ``layers``: [(index, PackedDocumentAttention)]
    whose ``recorded`` inputs are set. Must be called on every rank (MAX / mean reductions)."""
    names, values, mean_mask = [], [], []
    device = None
    for i, mod in layers:
        if mod.recorded is None:
            continue
        q, k, v, cu, max_len = mod.recorded
        mod.recorded = None
        device = q.device
        tag = f"attn/layer_{i:02d}"
        for name, t in (("q", q), ("k", k), ("v", v)):
            names.append(f"{tag}/max_abs_{name}")
            values.append(t.abs().max().float().item())
            mean_mask.append(False)
        exps = torch.cat([e8m0_exponent(t.float().abs().amax(-1), E4M3).flatten()
                          for t in (q, k, v)])
        names += [f"{tag}/scale_exp_min", f"{tag}/scale_exp_max"]
        values += [float(exps.min()), float(exps.max())]
        mean_mask += [False, False]
        names.append(f"{tag}/entropy")
        values.append(_entropy(q, k, cu, q.shape[-1] ** -0.5))
        mean_mask.append(True)
        if shadow and mod.recipe != "bf16":
            g = torch.Generator(device="cpu").manual_seed(i)
            do = torch.randn(q.shape, generator=g).to(device=q.device, dtype=q.dtype)
            outs = {}
            for recipe in (mod.recipe, "bf16"):
                qq, kk, vv = (t.clone().requires_grad_(True) for t in (q, k, v))
                with torch.enable_grad():
                    o = flamia.attention(qq, kk, vv, cu, max_len, recipe=recipe, impl=mod.impl)
                    o.backward(do)
                outs[recipe] = (o.detach(), qq.grad, kk.grad, vv.grad)
            for name, a, b in zip(("O", "dQ", "dK", "dV"), outs[mod.recipe], outs["bf16"]):
                names.append(f"shadow/layer_{i:02d}/rel_err_{name}")
                values.append(((a.float() - b.float()).norm() / b.float().norm()).item())
                mean_mask.append(False)
    if not names:
        return {}
    vals = torch.tensor(values, dtype=torch.float64, device=device)
    means = torch.tensor(mean_mask, device=device)
    summed = _all_reduce(torch.where(means, vals, torch.zeros_like(vals)), dist.ReduceOp.SUM)
    maxed = _all_reduce(torch.where(means, torch.full_like(vals, -1e300), vals), dist.ReduceOp.MAX)
    world = dist.get_world_size() if dist.is_initialized() else 1
    out = torch.where(means, summed / world, maxed)
    return dict(zip(names, out.tolist()))
