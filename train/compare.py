"""Compare training runs: BF16 against FLAMIA, from their metrics.jsonl (works offline).

    python -m train.compare RUN_DIR [RUN_DIR ...] --out report.png [--smooth 20] [--md report.md]

Each RUN_DIR is a job's dump folder (metrics.jsonl + run.json). Plots the loss curves (raw and
smoothed) and gradient-norm curves of all runs, and writes a Markdown table: final loss (mean of
the last ``--tail`` logged steps), its relative gap to the BF16 baseline (the runs whose recipe
is bf16; with several seeds, mean and spread across them), skipped steps, loss spikes and the
largest leakage-probe deltas seen (exactly 0 expected).
"""

import argparse
import json
import math
import os
import statistics
import sys


def load_run(folder: str) -> dict:
    path = os.path.join(folder, "metrics.jsonl")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{folder} has no metrics.jsonl (is it a training dump folder?)")
    with open(path) as f:
        records = [json.loads(line) for line in f if line.strip()]
    if not records:
        raise ValueError(f"{path} is empty: the run logged no step")
    info = {}
    if os.path.exists(os.path.join(folder, "run.json")):
        with open(os.path.join(folder, "run.json")) as f:
            info = json.load(f)
    # a resumed run appends: keep the last record of each step
    by_step = {r["step"]: r for r in records}
    # runs are named after their dump folder (configs name their folders after themselves)
    return {"folder": folder, "name": os.path.basename(os.path.normpath(folder)),
            "recipe": info.get("recipe", "unknown"), "attention": info.get("attention", "?"),
            "seed": info.get("seed"), "records": [by_step[s] for s in sorted(by_step)]}


def smooth(values, window):
    out, acc = [], []
    for v in values:
        acc.append(v)
        if len(acc) > window:
            acc.pop(0)
        out.append(sum(acc) / len(acc))
    return out


def summarize(runs, tail: int) -> list[dict]:
    rows = []
    for run in runs:
        recs = run["records"]
        finite = [r["loss"] for r in recs if math.isfinite(r["loss"])]
        final = statistics.fmean(finite[-tail:]) if finite else float("nan")
        probe = lambda key: max((r.get(key, 0.0) for r in recs), default=0.0)
        rows.append({"run": run["name"], "attention": run["attention"], "recipe": run["recipe"],
                     "seed": run["seed"], "steps": recs[-1]["step"], "final_loss": final,
                     "skipped_steps": max((r.get("skipped_steps", 0) for r in recs), default=0),
                     "loss_spikes": sum(r.get("loss_spike", 0) for r in recs),
                     "probe_causal": probe("probe/causal_max_abs_delta"),
                     "probe_cross_document": probe("probe/cross_document_max_abs_delta")})
    base = [r["final_loss"] for r in rows if r["recipe"] == "bf16"]
    ref = statistics.fmean(base) if base else None
    for r in rows:
        r["gap_vs_bf16"] = (r["final_loss"] - ref) / ref if ref else None
    by_recipe = {}
    for r in rows:
        by_recipe.setdefault(r["attention"], []).append(r["gap_vs_bf16"])
    for r in rows:
        gaps = [g for g in by_recipe[r["attention"]] if g is not None]
        r["gap_spread"] = statistics.stdev(gaps) if len(gaps) > 1 else None
    return rows


def markdown(rows) -> str:
    fmt = lambda v, f: "-" if v is None else format(v, f)
    lines = ["| run | attention | seed | steps | final loss | gap vs bf16 | spread (seeds) | "
             "skipped | spikes | probe causal | probe cross-doc |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(
            f"| {r['run']} | {r['attention']} | {r['seed']} | {r['steps']} | "
            f"{r['final_loss']:.4f} | {fmt(r['gap_vs_bf16'], '+.2%')} | "
            f"{fmt(r['gap_spread'], '.2%')} | {r['skipped_steps']} | {r['loss_spikes']} | "
            f"{r['probe_causal']:.1e} | {r['probe_cross_document']:.1e} |")
    if not any(r["recipe"] == "bf16" for r in rows):
        lines.append("\nNo BF16 run among these: no gap computed.")
    leaks = [r["run"] for r in rows if r["probe_causal"] or r["probe_cross_document"]]
    if leaks:
        lines.append(f"\n**Leakage probes non-zero in: {', '.join(leaks)}**")
    return "\n".join(lines)


def plot(runs, out: str, window: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_loss, ax_grad) = plt.subplots(1, 2, figsize=(13, 4.5))
    for run in runs:
        steps = [r["step"] for r in run["records"]]
        loss = [r["loss"] for r in run["records"]]
        label = f"{run['name']} ({run['attention']})"
        line, = ax_loss.plot(steps, loss, alpha=0.25, lw=0.8)
        ax_loss.plot(steps, smooth(loss, window), color=line.get_color(), lw=1.6, label=label)
        ax_grad.plot(steps, [r["grad_norm"] for r in run["records"]], color=line.get_color(),
                     lw=1.0, label=label)
    ax_loss.set(xlabel="step", ylabel="loss", title=f"loss (raw, and mean of {window})")
    ax_grad.set(xlabel="step", ylabel="grad norm (before clipping)", title="gradient norm",
                yscale="log")
    ax_loss.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("runs", nargs="+", help="dump folders of the runs")
    ap.add_argument("--out", default="report.png")
    ap.add_argument("--md", help="Markdown summary file (default: OUT with .md)")
    ap.add_argument("--smooth", type=int, default=20)
    ap.add_argument("--tail", type=int, default=10, help="steps averaged for the final loss")
    args = ap.parse_args(argv)
    runs = [load_run(f) for f in args.runs]
    plot(runs, args.out, args.smooth)
    table = markdown(summarize(runs, args.tail))
    md = args.md or os.path.splitext(args.out)[0] + ".md"
    with open(md, "w") as f:
        f.write(f"# Run comparison\n\n![curves]({os.path.basename(args.out)})\n\n{table}\n")
    print(table)
    print(f"\nwritten: {args.out}, {md}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
