"""Document-length report of a corpus: histogram PNG, percentiles, JSON.

    python -m data.report --corpus python-docs [--vocab 8192] [--out data/reports]

Lengths are in tokens of the project's tokenizer (documents without BOS/EOS). The kernels'
benchmark workloads (bench/attention.py) should resemble these distributions.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

PERCENTILES = (1, 5, 10, 25, 50, 75, 90, 95, 99)


def length_report(lengths: np.ndarray, title: str, out_prefix: Path) -> dict:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lengths = np.asarray(lengths)
    stats = {"documents": int(lengths.size), "tokens": int(lengths.sum()),
             "mean": float(lengths.mean()), "max": int(lengths.max()),
             "percentiles": {str(p): float(np.percentile(lengths, p)) for p in PERCENTILES}}
    fig, ax = plt.subplots(figsize=(7, 4))
    bins = np.logspace(0, np.log10(max(2, lengths.max())), 60)
    ax.hist(lengths, bins=bins, color="#4477aa")
    ax.set_xscale("log")
    ax.set_xlabel("document length (tokens)")
    ax.set_ylabel("documents")
    med = stats["percentiles"]["50"]
    ax.set_title(f"{title}: {lengths.size} documents, median {med:.0f} tokens")
    for p in (10, 50, 90):
        ax.axvline(stats["percentiles"][str(p)], color="k", ls=":", lw=1)
    fig.tight_layout()
    out_prefix.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(f"{out_prefix}.png", dpi=120)
    plt.close(fig)
    Path(f"{out_prefix}.json").write_text(json.dumps(stats, indent=1))
    return stats


def main(argv=None):
    from .shards import Shards, build_shards
    from .tokenizer import train_tokenizer

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--corpus", default="python-docs")
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--max-docs", type=int, default=None)
    ap.add_argument("--out", default="data/reports")
    args = ap.parse_args(argv)
    tok = train_tokenizer(args.corpus if args.corpus != "default" else "python-docs", args.vocab)
    shards = Shards(build_shards(args.corpus, tok, max_docs=args.max_docs))
    name = args.corpus.replace("/", "_").replace(":", "_")
    stats = length_report(shards.lengths(), args.corpus, Path(args.out) / f"lengths_{name}")
    print(json.dumps(stats, indent=1))
    print(f"written: {args.out}/lengths_{name}.png / .json")


if __name__ == "__main__":
    main()
