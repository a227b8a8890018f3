"""Causal-leakage probes (DESIGN.md section 5): bitwise, never within a tolerance.

Kernel level, for any ``attn(q, k, v, cu_seqlens) -> o`` (differentiable):
    causal           perturbing q, k or v of token t leaves O_i bitwise unchanged, i < t, same segment
    gradient_causal  perturbing q, k, v or dO of token t leaves dQ_i bitwise unchanged, i < t
    cross_document   perturbing q, k, v, dO of one whole segment leaves O, dQ, dK, dV of every
                     other token bitwise unchanged
Model level, for any ``logits_fn(tokens [B, L]) -> logits [B, L, V]``:
    model_causal          changing token t leaves logits at positions < t bitwise unchanged
    model_cross_document  changing one document leaves every other position's logits unchanged

Perturbations only change values (a target row multiplied by ``factor`` = 1e3 by default, the
adversarial "loud future token"), never shapes, so no kernel choice or launch shape changes.
Each probe reports the largest absolute change and where it happened; 0.0 is a pass. A probe
that cannot fail proves nothing: the tests run the same probes on the leaky control recipes and
require a non-zero result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import torch

__all__ = [
    "ProbeResult",
    "adversarial_cu_seqlens",
    "probe_attention",
    "model_causal_probe",
    "model_cross_document_probe",
]


@dataclass
class ProbeResult:
    probe: str
    max_abs_delta: float
    where: str  # a sentence locating the largest change ("" when none)
    n_compared: int  # elements compared bitwise, over all perturbations

    @property
    def passed(self) -> bool:
        return self.max_abs_delta == 0.0

    def __str__(self) -> str:
        verdict = "PASS" if self.passed else "LEAK"
        loc = f" at {self.where}" if self.where else ""
        return (
            f"{self.probe:<22} {verdict}  max|delta|={self.max_abs_delta:.3e}{loc} "
            f"({self.n_compared} elements)"
        )


class _Tracker:
    """Keeps the largest |delta| seen by one probe and where it was."""

    def __init__(self, probe: str):
        self.result = ProbeResult(probe, 0.0, "", 0)

    def compare(self, new: torch.Tensor, base: torch.Tensor, rows: torch.Tensor, label: str):
        """Compare ``new`` with ``base`` on token rows ``rows`` (a bool mask or an index)."""
        a, b = new[rows].float(), base[rows].float()
        self.result.n_compared += a.numel()
        if a.numel() == 0:
            return
        delta = (a - b).abs()
        # NaN != NaN is a change too: a NaN appearing where there was none is a leak.
        delta = torch.where(torch.isnan(a) ^ torch.isnan(b), torch.full_like(delta, float("inf")), delta)
        delta = torch.nan_to_num(delta, nan=0.0)
        m = delta.max().item()
        if m > self.result.max_abs_delta:
            flat = int(delta.argmax().item())
            token_pos = flat // (delta.numel() // delta.shape[0])
            token = torch.arange(new.shape[0], device=new.device)[rows][token_pos].item()
            self.result.max_abs_delta = m
            self.result.where = f"{label}, token {token}"


def adversarial_cu_seqlens(total: int, device=None) -> torch.Tensor:
    """Segment boundaries off the 32/64/128 tile grid: 1, 31, 33, 63, 65, ... over the first half
    (documents of length 1, 2 and 30), then segments of 1, 7, 129 and the rest.

    Returns int32 cu_seqlens [S + 1] for ``total`` tokens.
    """
    bounds = [0, 1]
    k = 1
    while 32 * k + 1 < total // 2:
        bounds += [32 * k - 1, 32 * k + 1]
        k += 1
    for length in (1, 7, 129):
        if bounds[-1] + length < total:
            bounds.append(bounds[-1] + length)
    bounds = [b for b in bounds if b < total] + [total]
    return torch.tensor(bounds, dtype=torch.int32, device=device)


def _segments(cu_seqlens: torch.Tensor) -> list[tuple[int, int]]:
    vals = cu_seqlens.tolist()
    return list(zip(vals[:-1], vals[1:]))


def _default_targets(segs: list[tuple[int, int]], max_targets: int) -> list[int]:
    """Targets with at least one earlier token in their segment: the last token of short and
    long segments, and a token in the middle of the longest one, spread over the batch."""
    cands = [e - 1 for s, e in segs if e - s >= 2]
    longest = max(segs, key=lambda se: se[1] - se[0])
    if longest[1] - longest[0] >= 4:
        cands.append((longest[0] + longest[1]) // 2 + 1)
    if len(cands) > max_targets:
        idx = torch.linspace(0, len(cands) - 1, max_targets).round().long().tolist()
        cands = [cands[i] for i in sorted(set(idx))]
    return sorted(set(cands))


def _run(attn, q, k, v, do, cu_seqlens):
    q, k, v = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
    o = attn(q, k, v, cu_seqlens)
    o.backward(do)
    return o.detach(), q.grad.detach(), k.grad.detach(), v.grad.detach()


def probe_attention(
    attn: Callable[..., torch.Tensor],
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens: torch.Tensor,
    do: torch.Tensor | None = None,
    *,
    targets: Sequence[int] | None = None,
    cross_segments: Sequence[int] | None = None,
    factor: float = 1e3,
    max_targets: int = 6,
) -> dict[str, ProbeResult]:
    """Run the causal, gradient-causal and cross-document probes on ``attn``.

    ``targets``: tokens t to perturb (default: a spread of segment ends); ``cross_segments``:
    segment indices to perturb as a whole (default: a short one, one off the grid, the longest).
    Returns {"causal", "gradient_causal", "cross_document"} -> ProbeResult.
    """
    if do is None:
        gen = torch.Generator(device="cpu").manual_seed(1234)
        do = torch.randn(q.shape, generator=gen).to(device=q.device, dtype=q.dtype)
    segs = _segments(cu_seqlens)
    seg_start = {}
    for s, e in segs:
        for t in range(s, e):
            seg_start[t] = s
    base = _run(attn, q, k, v, do, cu_seqlens)
    causal, grad_causal, cross = _Tracker("causal"), _Tracker("gradient_causal"), _Tracker("cross_document")
    tokens = torch.arange(q.shape[0], device=q.device)

    if targets is None:
        targets = _default_targets(segs, max_targets)
    for t in targets:
        rows = (tokens >= seg_start[t]) & (tokens < t)
        for which in ("q", "k", "v", "do"):
            ins = {"q": q, "k": k, "v": v, "do": do}
            ins[which] = ins[which].clone()
            ins[which][t] = ins[which][t] * factor
            o, dq, _, _ = _run(attn, ins["q"], ins["k"], ins["v"], ins["do"], cu_seqlens)
            label = f"perturbing {which} of token {t}"
            if which != "do":
                causal.compare(o, base[0], rows, "O " + label)
            grad_causal.compare(dq, base[1], rows, "dQ " + label)

    if cross_segments is None:
        by_len = sorted(range(len(segs)), key=lambda i: segs[i][1] - segs[i][0])
        cross_segments = sorted({by_len[0], by_len[len(by_len) // 2], by_len[-1]})
    for si in cross_segments:
        s, e = segs[si]
        inside = (tokens >= s) & (tokens < e)
        ins = [t.clone() for t in (q, k, v, do)]
        for t in ins:
            t[inside] = t[inside] * factor
        outs = _run(attn, *ins[:3], ins[3], cu_seqlens)
        for name, new, old in zip(("O", "dQ", "dK", "dV"), outs, base):
            cross.compare(new, old, ~inside, f"{name} perturbing segment {si} [{s}, {e})")
    return {r.probe: r for r in (causal.result, grad_causal.result, cross.result)}


def _perturb_tokens(tokens, mask, vocab_size: int, keep: Sequence[int], replacement: int | None):
    """Replace tokens under ``mask`` by ``replacement`` (an adversarial id, e.g. one with a large
    embedding) or, by default, by the next id that is not in ``keep`` (e.g. BOS/EOS)."""
    new = tokens.clone()
    if replacement is not None:
        new[mask] = replacement
        return new
    cand = (tokens + 1) % vocab_size
    keep_t = torch.tensor(list(keep), device=tokens.device, dtype=tokens.dtype)
    for _ in range(len(keep) + 1):  # step past reserved ids
        bad = torch.isin(cand, keep_t) if len(keep) else torch.zeros_like(cand, dtype=torch.bool)
        cand = torch.where(bad, (cand + 1) % vocab_size, cand)
    new[mask] = cand[mask]
    return new


def model_causal_probe(
    logits_fn: Callable[[torch.Tensor], torch.Tensor],
    tokens: torch.Tensor,
    targets: Sequence[tuple[int, int]],
    vocab_size: int,
    keep: Sequence[int] = (),
    replacement: int | None = None,
) -> ProbeResult:
    """Change token (row, t) for each target; logits at (row, < t) must be bitwise unchanged."""
    track = _Tracker("model_causal")
    with torch.no_grad():
        base = logits_fn(tokens)
        for row, t in targets:
            mask = torch.zeros_like(tokens, dtype=torch.bool)
            mask[row, t] = True
            new = logits_fn(_perturb_tokens(tokens, mask, vocab_size, keep, replacement))
            track.compare(new[row], base[row], slice(0, t), f"logits row {row} changing token {t}")
    return track.result


def model_cross_document_probe(
    logits_fn: Callable[[torch.Tensor], torch.Tensor],
    tokens: torch.Tensor,
    documents: Sequence[tuple[int, int, int]],
    vocab_size: int,
    keep: Sequence[int] = (),
    replacement: int | None = None,
) -> ProbeResult:
    """Change every token of document (row, start, end) but those in ``keep`` (the ids that mark
    boundaries); the logits everywhere outside that document must be bitwise unchanged."""
    track = _Tracker("model_cross_document")
    with torch.no_grad():
        base = logits_fn(tokens)
        for row, s, e in documents:
            mask = torch.zeros_like(tokens, dtype=torch.bool)
            mask[row, s:e] = True
            new = logits_fn(_perturb_tokens(tokens, mask, vocab_size, keep, replacement))
            outside = ~mask
            track.compare(
                new[outside].unsqueeze(1), base[outside].unsqueeze(1),
                slice(None), f"logits changing document row {row} [{s}, {e}) (flattened index)",
            )
    return track.result
