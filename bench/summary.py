"""The targets of a benchmark run, read from the JSON that ``bench.attention`` writes: one row per
workload with each FLAMIA provider's fwd+bwd time and its ratio to the fastest baseline, and
whether the BF16 and MXFP8 targets hold in that run.

    python -m bench.summary bench/results/attention_<run>.json [--against <older run>.json]

Ratios are the fastest baseline's fwd+bwd time over the provider's (above 1: faster than every
baseline), as bench.attention's own "vs best baseline" column. Baselines are bench.attention's
BASELINES (FlexAttention, varlen, cuDNN dense, cuDNN THD); one that failed on a workload (its
``error``, e.g. cuDNN dense on several documents per row) is not counted there. Targets (DESIGN.md section 7; issues 2 and 7):
  bf16   flamia-bf16 at least as fast as the fastest baseline on every packed workload, and at
         least 0.9x of it on the one-document workloads (within 10% of cuDNN);
  mxfp8  flamia-mxfp8 at least 1.3x the fastest baseline on every packed workload with D = 128.
A target that a run cannot judge (its provider or every baseline missing on some workload) says
so instead of passing. Rows of a timing experiment (bench.attention's ``experiment`` key, e.g.
FLAMIA_UNSAFE_NO_INREG_SCALES=1: wrong values by design) are marked in the table and judge no
target.

--against: the same workloads of an older run beside each time, with the change in percent
(negative: faster now). Runs on different GPUs are not comparable; the tool refuses them unless
--any-gpu is given.
"""

from __future__ import annotations

import argparse
import json
import sys

from bench.attention import BASELINES

ONE_DOC = "one_doc"
EXPERIMENT_MARK = " [experiment]"
TARGETS = {  # provider -> (minimum ratio on packed workloads, on one document, D it applies to)
    "flamia-bf16": (1.0, 0.9, None),
    "flamia-mxfp8": (1.3, None, 128),
}


def load(path: str) -> dict:
    try:
        with open(path) as f:
            run = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise SystemExit(f"{path}: not a readable JSON file ({e})")
    if not isinstance(run, dict) or not isinstance(run.get("results"), list):
        raise SystemExit(f"{path}: no 'results' list; expected the JSON that bench.attention writes")
    return run


def workload_key(row: dict) -> tuple:
    return row["workload"], row["rows"], row["L"], row["Hq"], row["Hkv"], row["D"]


def workload_label(key: tuple) -> str:
    name, rows, length, hq, hkv, d = key
    return f"{name} {rows}x{length} {hq}/{hkv} D{d}"


def by_workload(run: dict) -> dict[tuple, dict[str, float | None]]:
    """{workload key: {provider: fwd+bwd ms, or None where it failed}}, in the run's order."""
    table: dict[tuple, dict[str, float | None]] = {}
    for row in run["results"]:
        ms = row.get("fwd_bwd_ms")
        table.setdefault(workload_key(row), {})[row["provider"]] = (
            None if "error" in row or ms is None else float(ms))
    return table


def experiment_cells(run: dict) -> dict[tuple, str]:
    """{(workload key, provider): what the experiment was} for the rows of a timing experiment."""
    return {(workload_key(row), row["provider"]): row["experiment"]
            for row in run["results"] if row.get("experiment")}


def fastest_baseline(times: dict[str, float | None]) -> tuple[str, float] | None:
    baselines = [(ms, name) for name, ms in times.items() if name in BASELINES and ms is not None]
    if not baselines:
        return None
    ms, name = min(baselines)
    return name, ms


def required_ratio(provider: str, key: tuple) -> float | None:
    """The ratio to the fastest baseline that ``provider``'s target asks for on workload ``key``,
    or None where its target does not judge that workload (or it has none)."""
    if provider not in TARGETS:
        return None
    packed_min, one_doc_min, only_d = TARGETS[provider]
    if only_d is not None and key[5] != only_d:
        return None
    return one_doc_min if key[0] == ONE_DOC else packed_min


def flamia_providers(table: dict) -> list[str]:
    names: list[str] = []
    for times in table.values():
        names += [p for p in times if p.startswith("flamia") and p not in names]
    return names


def verdicts(table: dict, experiments: dict[tuple, str] | None = None) -> list[str]:
    """One line per target whose provider the run has: met, not met (with the cells that miss),
    or not judged (with the cells that lack a number or are a timing experiment's)."""
    experiments = experiments or {}
    lines = []
    providers = flamia_providers(table)
    for provider, (packed_min, one_doc_min, only_d) in TARGETS.items():
        if provider not in providers:
            continue
        misses, unjudged, trials = [], [], []
        ratios = {"packed": [], "one document": []}
        for key, times in table.items():
            one_doc = key[0] == ONE_DOC
            need = required_ratio(provider, key)
            if need is None:
                continue
            best, ms = fastest_baseline(times), times.get(provider)
            if (key, provider) in experiments:
                trials.append(workload_label(key))
                continue
            if best is None or ms is None:
                unjudged.append(workload_label(key))
                continue
            ratio = best[1] / ms
            ratios["one document" if one_doc else "packed"].append(ratio)
            if ratio < need:
                misses.append(f"{workload_label(key)} {ratio:.2f}x (needs {need:.2f}x)")
        rule = f">= {packed_min}x packed" + (f", >= {one_doc_min}x one document"
                                             if one_doc_min is not None else "")
        rule += f", D = {only_d}" if only_d is not None else ""
        if misses:  # one miss decides it, whatever else lacks a number
            lines.append(f"{provider} ({rule}): NOT MET on {len(misses)}: {'; '.join(misses)}")
        elif unjudged or trials:
            why = []
            if unjudged:
                why.append(f"no number for: {'; '.join(unjudged)}")
            if trials:
                why.append(f"timing-experiment rows (wrong values) on: {'; '.join(trials)}")
            lines.append(f"{provider} ({rule}): NOT JUDGED, {'; '.join(why)}")
        else:
            # how many workloads: a quick run's few are not the grid's eleven
            lowest = ", ".join(f"{kind} {min(r):.2f}x over {len(r)}" for kind, r in ratios.items()
                               if r)
            lines.append(f"{provider} ({rule}): MET on the workloads of this run (lowest ratio: "
                         f"{lowest})")
    return lines


def summary(run: dict, older: dict | None = None) -> str:
    table = by_workload(run)
    experiments = experiment_cells(run)
    before = by_workload(older) if older is not None else {}
    before_experiments = experiment_cells(older) if older is not None else {}
    providers = flamia_providers(table)
    env = run.get("env", {})
    out = [f"# {env.get('gpu', '?')}, {env.get('date', '?')}, commit {env.get('git_commit', '?')}"
           + (f", against {older.get('env', {}).get('date', '?')}" if older is not None else "")]
    header = ["workload", "fastest baseline ms"] + [f"{p} ms (ratio)" for p in providers]
    out += ["| " + " | ".join(header) + " |", "|---|---|" + "---:|" * len(providers)]
    for key, times in table.items():
        best = fastest_baseline(times)
        cells = [workload_label(key), f"{best[1]:.3f} ({best[0]})" if best else "-"]
        for p in providers:
            ms = times.get(p)
            if ms is None:
                cells.append("-")
                continue
            cell = f"{ms:.3f}" + (f" ({best[1] / ms:.2f}x)" if best else "")
            cell += EXPERIMENT_MARK if (key, p) in experiments else ""
            was = before.get(key, {}).get(p)
            if was is not None:
                cell += f", was {was:.3f} ({(ms / was - 1) * 100:+.1f}%)"
                cell += EXPERIMENT_MARK if (key, p) in before_experiments else ""
            cells.append(cell)
        out.append("| " + " | ".join(cells) + " |")
    notes = sorted(set(experiments.values()) | set(before_experiments.values()))
    if notes:
        out += ["", f"{EXPERIMENT_MARK.strip()}: a timing experiment's row ({'; '.join(notes)})"]
    out += ["", "Targets:"] + [f"- {line}" for line in verdicts(table, experiments)]
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("run", help="a bench.attention JSON file (bench/results/attention_*.json)")
    ap.add_argument("--against", help="an older run's JSON: its times beside this run's")
    ap.add_argument("--any-gpu", action="store_true",
                    help="compare with --against even when the two runs' GPUs differ")
    args = ap.parse_args(argv)
    run = load(args.run)
    older = load(args.against) if args.against else None
    if older is not None and not args.any_gpu:
        gpus = run.get("env", {}).get("gpu"), older.get("env", {}).get("gpu")
        if gpus[0] != gpus[1]:
            ap.error(f"the runs are on different GPUs ({gpus[0]!r} vs {gpus[1]!r}); times are "
                     "comparable only on the same one (--any-gpu to show them anyway)")
    print(summary(run, older))
    return 0


if __name__ == "__main__":
    sys.exit(main())
