"""The benchmark harness's own parts that run without a GPU (bench/attention.py,
bench/host_gaps.py, bench/host_layers.py, bench/summary.py)."""

import json
import os
import stat
import time

import pytest
import torch

from bench.attention import GpuSampler, format_table, gpu_summary, host_ms, round_orders


@pytest.fixture
def fake_nvidia_smi(tmp_path, monkeypatch):
    """An nvidia-smi on PATH that prints the given CSV samples, then waits to be stopped."""
    def install(lines):
        script = tmp_path / "nvidia-smi"
        body = "".join(f"echo '{line}'\n" for line in lines)
        script.write_text(f"#!/bin/sh\n{body}exec sleep 30\n")
        script.chmod(script.stat().st_mode | stat.S_IEXEC)
        monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
        monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    return install


def test_gpu_sampler_summarizes_the_samples(fake_nvidia_smi):
    """Median and minimum of the SM clock, the maximum clock, median power; lines that are not
    samples (a header, an error text) are skipped."""
    fake_nvidia_smi(["1755, 1980, 612.5", "[N/A], 1980, 600", "1980, 1980, 650.0",
                     "1650, 1980, 700.0"])
    with GpuSampler() as gpu:
        time.sleep(0.5)  # the script prints its lines at once
    assert gpu.summary == {"sm_mhz": 1755.0, "sm_mhz_min": 1650.0, "sm_max_mhz": 1980.0,
                           "power_w": 650.0, "samples": 3}


def test_gpu_sampler_without_nvidia_smi(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi here
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    with GpuSampler() as gpu:
        pass
    assert gpu.summary is None


def test_round_orders_balance_positions():
    """Over an even number of rounds every provider's positions add up to the same number (a
    linear drift of the GPU's speed cancels in the mean); one round keeps the given order."""
    names = ["a", "b", "c", "d", "e"]
    orders = round_orders(names, 4)
    assert orders[0] == names and orders[1] == names[::-1]
    assert all(sorted(o) == sorted(names) for o in orders)
    sums = {n: sum(o.index(n) for o in orders) for n in names}
    assert set(sums.values()) == {2 * (len(names) - 1)}
    assert round_orders(names, 1) == [names]
    with pytest.raises(ValueError, match="rounds=0"):
        round_orders(names, 0)


def test_gpu_summary_of_pooled_rounds():
    """The summary of several rounds' samples is the summary of them pooled."""
    rows = [[1980, 1980, 500], [1755, 1980, 690], [1830, 1980, 650]]
    assert gpu_summary(rows) == {"sm_mhz": 1830, "sm_mhz_min": 1755, "sm_max_mhz": 1980,
                                 "power_w": 650, "samples": 3}
    assert gpu_summary([]) is None


def test_gpu_sampler_off(fake_nvidia_smi):
    """A period of 0 runs no nvidia-smi at all (--sample-ms 0)."""
    fake_nvidia_smi(["1980, 1980, 600"])
    with GpuSampler(0) as gpu:
        time.sleep(0.2)
    assert gpu.summary is None and gpu.rows == []


def test_host_ms_is_the_median_call_time():
    """host_ms: the median time until each call returns, each call after a sync (counted)."""
    delays = iter([0.03, 0.001, 0.002, 0.001, 0.04])
    syncs = []
    ms = host_ms(lambda: time.sleep(next(delays)), lambda: syncs.append(1), iters=5)
    assert 1.5 <= ms < 20  # the median is the 2 ms call, not a 30-40 ms one
    assert len(syncs) == 6  # before each call and once after the last


def test_host_gaps_per_call():
    """host_gaps.summarize: a call runs from the flush's end to its last kernel's end; a kernel
    that waited for the host shows the wait as its gap; kernels before the first flush are not
    a call."""
    from bench.host_gaps import summarize
    timeline = [("b", 0, 5),  # before any flush: left out
                ("flush", 10, 90), ("fwd", 100, 200), ("bwd", 250, 300),
                ("flush", 300, 380), ("fwd", 380, 500), ("bwd", 510, 540)]
    span, busy, per = summarize(timeline)
    assert span == (210 + 160) / 2  # 90 -> 300 and 380 -> 540
    assert busy == (150 + 150) / 2
    assert per == {"fwd": ((10 + 0) / 2, (100 + 120) / 2), "bwd": ((50 + 10) / 2, (50 + 30) / 2)}


def test_host_layers_cpu_takes_the_hopper_path(capsys):
    """host_layers --cpu: a BF16 fwd+bwd under its stub launches the default Hopper kernels
    (else its host times would be of another path), and the tool prints every path's time."""
    import flamia
    from bench.host_layers import cpu_inputs, main, stubbed_hopper

    with stubbed_hopper() as launches:
        lengths, q, k, v, do, cu = cpu_inputs("u32_1024", 1, 2048, 2, 2, 128)
        out = flamia.attention(q, k, v, cu, max(lengths), recipe="bf16", impl="triton")
        torch.autograd.grad(out, (q, k, v), do)
    assert [name for name, *_ in launches] == [
        "_attn_fwd_hopper_persistent_kernel", "_attn_bwd_dq_hopper_persistent_kernel",
        "_attn_bwd_dkdv_hopper_persistent_kernel"]
    main(["--cpu"])
    rows = [line.split("|") for line in capsys.readouterr().out.splitlines()
            if line.startswith("| u32_1024 |")]
    assert [r[2].strip() for r in rows] == [
        "launch fwd", "launch dq", "launch dkdv", "kernels fwd", "kernels bwd", "op fwd",
        "op bwd", "flamia fwd", "flamia fwd+bwd"]
    assert all(float(r[3]) > 0 for r in rows)


def test_host_layers_ab_times_each_value_in_one_process(capsys, monkeypatch):
    """host_layers --ab ENV=A,B: flamia fwd+bwd under each value, in alternating rounds, the
    variable set while its value is timed (seen by the launch path) and restored after."""
    from bench import host_layers
    from flamia.kernels import launch

    seen = []
    monkeypatch.setattr(launch, "launch_mode", lambda: seen.append(
        os.environ.get("FLAMIA_LAUNCH")) or "jit")
    monkeypatch.delenv("FLAMIA_LAUNCH", raising=False)
    host_layers.main(["--cpu", "--ab", "FLAMIA_LAUNCH=jit,cached", "--rounds", "2"])
    rows = [line for line in capsys.readouterr().out.splitlines() if "fwd+bwd, FLAMIA" in line]
    assert [r.split("|")[2].strip() for r in rows] == [
        "flamia fwd+bwd, FLAMIA_LAUNCH=jit", "flamia fwd+bwd, FLAMIA_LAUNCH=cached"]
    assert all(r.count(",") >= 2 for r in rows)  # two rounds each
    assert {"jit", "cached"} <= set(seen) and "FLAMIA_LAUNCH" not in os.environ
    with pytest.raises(SystemExit):
        host_layers.main(["--cpu", "--ab", "FLAMIA_LAUNCH"])


def test_table_shows_round_spread_and_host_time():
    row = {"workload": "u32_1024", "Hq": 16, "Hkv": 16, "D": 128, "segments": 60,
           "provider": "p", "fwd_ms": 0.3, "bwd_ms": 1.0, "fwd_bwd_ms": 1.3, "fwd_tflops": 1,
           "bwd_tflops": 1, "fwd_bwd_tflops": 1, "fwd_bwd_ms_rounds": [1.2, 1.4],
           "host_fwd_bwd_ms": 1.1, "rel_err": {"O": 1e-3}}
    failed = {"workload": "u32_1024", "Hq": 16, "Hkv": 16, "D": 128, "segments": 60,
              "provider": "x", "error": "no"}
    lines = format_table([row, failed]).splitlines()
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    for line in lines[2:]:  # every row has the header's columns
        assert len(line.strip("|").split("|")) == len(header)
    cells = dict(zip(header, (c.strip() for c in lines[2].strip("|").split("|"))))
    assert cells["round spread"] == "15.4%" and cells["host ms"] == "1.100"


def test_run_workload_times_in_alternating_rounds(monkeypatch):
    """run_workload on CPU with fake providers and a fake timer: each provider is checked once,
    then timed once per round in alternating order; its time is the mean of its round medians;
    a provider that fails in a later round is reported with the error and not timed further;
    the GC is back on afterwards. (The timer is do_bench on the GPU; here it is recorded.)"""
    import gc

    import bench.attention as A
    import triton.testing

    total, h, d = 64, 2, 16

    def inputs(dist, rows, L, hq, hkv, d_, seed=0):
        gen = torch.Generator().manual_seed(seed)
        mk = lambda: torch.randn(total, h, d, generator=gen)
        q, k, v = (mk().requires_grad_() for _ in range(3))
        return [total], q, k, v, mk(), torch.tensor([0, total], dtype=torch.int32)

    attend = lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(
        q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), is_causal=True).transpose(0, 1)

    def reference(q, k, v, do, lengths):
        q_, k_, v_ = (t.detach().clone().requires_grad_() for t in (q, k, v))
        o = attend(q_, k_, v_)
        o.backward(do)
        return o.detach(), q_.grad, k_.grad, v_.grad

    prep = lambda q, k, v, cu, lengths, L: (lambda: attend(q, k, v))
    calls = []
    times = {"a": [(1.0, 3.0), (1.2, 3.4)], "b": [(2.0, 5.0), (2.0, 5.0)]}

    def fake_time(fn, q, k, v, do, rounds=1):
        name = ["a", "b", "c", "c", "b", "a"][len(calls)]
        calls.append(name)
        if name == "c":
            if calls.count("c") == 2:
                raise RuntimeError("lost the device")
            return 1.0, 2.0
        return times[name][calls.count(name) - 1]

    monkeypatch.setattr(A, "workload_inputs", inputs)
    monkeypatch.setattr(A, "segment_reference", reference)
    monkeypatch.setattr(A, "PROVIDERS", {"a": prep, "b": prep, "c": prep})
    monkeypatch.setattr(A, "BASELINES", ("b",))
    monkeypatch.setattr(A, "time_provider", fake_time)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(triton.testing, "do_bench", lambda *args, **kwargs: 0.1)
    rows = A.run_workload("one_doc", 1, total, h, h, d, ["a", "b", "c"], rounds=2,
                          sample_ms=0)
    assert calls == ["a", "b", "c", "c", "b", "a"]  # as given, then reversed
    res = {r["provider"]: r for r in rows}
    assert res["a"]["fwd_ms_rounds"] == [1.0, 1.2] and res["a"]["fwd_ms"] == pytest.approx(1.1)
    assert res["a"]["fwd_bwd_ms"] == pytest.approx(3.2)
    assert res["a"]["bwd_ms"] == pytest.approx(2.1)
    assert res["a"]["speedup_vs_fastest_baseline"] == pytest.approx(5.0 / 3.2)
    assert res["a"]["host_fwd_bwd_ms"] > 0 and max(res["a"]["rel_err"].values()) < 1e-6
    assert "lost the device" in res["c"]["error"] and "fwd_ms" not in res["c"]
    assert gc.isenabled()


def _run(cells, gpu="GPU A"):
    """A bench.attention result file's shape: cells = {(workload, D): {provider: ms or None}}
    (None: the provider failed there)."""
    results = []
    for (workload, d), times in cells.items():
        for provider, ms in times.items():
            row = {"workload": workload, "rows": 4, "L": 8192, "Hq": 16, "Hkv": 16, "D": d,
                   "provider": provider}
            row.update({"fwd_bwd_ms": ms} if ms is not None else {"error": "RuntimeError: no"})
            results.append(row)
    return {"env": {"gpu": gpu, "date": "today", "git_commit": "abc"}, "results": results}


def test_summary_judges_the_targets():
    from bench import summary
    run = _run({("one_doc", 128): {"flamia-bf16": 1.05, "flamia-mxfp8": 1.5, "cudnn-dense": 1.0,
                                   "cudnn-thd": 1.1},
                ("u32_1024", 128): {"flamia-bf16": 0.9, "flamia-mxfp8": 0.7, "cudnn-dense": None,
                                    "cudnn-thd": 1.0, "flex": 1.2},
                ("u32_1024", 64): {"flamia-bf16": 0.5, "flamia-mxfp8": 2.0, "cudnn-thd": 1.0}})
    table = summary.by_workload(run)
    assert summary.fastest_baseline(table[("u32_1024", 4, 8192, 16, 16, 128)]) == ("cudnn-thd", 1.0)
    lines = summary.verdicts(table)
    assert lines[0].startswith("flamia-bf16") and "MET on the workloads" in lines[0]
    assert "packed 1.11x over 2, one document 0.95x over 1" in lines[0]
    # mxfp8: 1/0.7 = 1.43x on the D = 128 packed workload; D = 64 (0.5x) and one_doc don't count
    assert lines[1].startswith("flamia-mxfp8") and "MET" in lines[1] and "over 1" in lines[1]
    text = summary.summary(run)
    assert "| u32_1024 4x8192 16/16 D128 | 1.000 (cudnn-thd) | 0.900 (1.11x) | 0.700 (1.43x) |" in text


def test_summary_reports_misses_and_cells_it_cannot_judge():
    from bench import summary
    slow_one_doc = _run({("one_doc", 128): {"flamia-bf16": 1.2, "cudnn-dense": 1.0},
                         ("equal_2k", 128): {"flamia-bf16": 0.9, "cudnn-thd": 1.0}})
    (line, ) = summary.verdicts(summary.by_workload(slow_one_doc))
    assert "NOT MET on 1: one_doc 4x8192 16/16 D128 0.83x (needs 0.90x)" in line
    no_baseline = _run({("equal_2k", 128): {"flamia-bf16": 0.9, "cudnn-thd": None},
                        ("u32_1024", 128): {"flamia-bf16": None, "cudnn-thd": 1.0}})
    (line, ) = summary.verdicts(summary.by_workload(no_baseline))
    assert "NOT JUDGED" in line and "equal_2k" in line and "u32_1024" in line


def test_summary_against_an_older_run(tmp_path, capsys):
    from bench import summary
    new = _run({("u32_1024", 128): {"flamia-bf16": 0.9, "cudnn-thd": 1.0}})
    old = _run({("u32_1024", 128): {"flamia-bf16": 1.0, "cudnn-thd": 1.0}})
    other_gpu = _run({("u32_1024", 128): {"flamia-bf16": 1.0, "cudnn-thd": 1.0}}, gpu="GPU B")
    paths = {}
    for name, run in (("new", new), ("old", old), ("other", other_gpu)):
        paths[name] = tmp_path / f"{name}.json"
        paths[name].write_text(json.dumps(run))
    assert summary.main([str(paths["new"]), "--against", str(paths["old"])]) == 0
    assert "0.900 (1.11x), was 1.000 (-10.0%)" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        summary.main([str(paths["new"]), "--against", str(paths["other"])])
    assert "different GPUs" in capsys.readouterr().err
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(SystemExit, match="no 'results' list"):
        summary.main([str(tmp_path / "bad.json")])


def test_summary_of_the_saved_grid():
    """The 2026-12-06 16:51 grid (H100) as saved: the BF16 target met, MXFP8's not."""
    from bench import summary
    results = os.path.join(os.path.dirname(__file__), "..", "bench", "results")
    run = summary.load(os.path.join(results, "attention_20261206-1651_NVIDIA_H100_80GB_HBM3.json"))
    bf16, mxfp8 = summary.verdicts(summary.by_workload(run))
    assert "MET on the workloads" in bf16 and "packed 1.02x over 8, one document 0.95x over 3" in bf16
    assert "NOT MET on 7" in mxfp8
    # the same ratios as the harness's own column
    table = summary.by_workload(run)
    for row in run["results"]:
        if row["provider"].startswith("flamia") and "fwd_bwd_ms" in row:
            best = summary.fastest_baseline(table[summary.workload_key(row)])
            assert best[1] / row["fwd_bwd_ms"] == pytest.approx(row["speedup_vs_fastest_baseline"])


def test_pscale_rules_compute_the_recipe_and_stay_causal():
    """bench.pscale_rules: its amax rule is the reference's forward bit for bit; the two bound
    rules change O only by rounding, and no row's O moves when a later token of its document (or
    another document) is scaled by 1e3 (their bounds read visible entries only)."""
    from bench.pscale_rules import RULES, forward_o, inputs
    from flamia.reference import reference_attention

    total = 192
    cu = torch.tensor([0, 70, total], dtype=torch.int32)
    q, k, v = inputs("outliers", total, 0, cu)
    outs = {rule: forward_o(q, k, v, cu, "mxfp8", rule) for rule in RULES}
    ref = reference_attention(q, k, v, cu, recipe="mxfp8")
    assert torch.equal(outs["amax"].to(torch.bfloat16), ref)
    for rule in ("tile_bound", "running_bound"):
        rel = (outs[rule] - outs["amax"]).norm() / outs["amax"].norm()
        assert 0 < rel < 1e-3, (rule, rel)
    future = 130  # in the second document, off the 64-token grid
    k2, v2 = k.clone(), v.clone()
    k2[future] *= 1e3
    v2[future] *= 1e3
    for rule in RULES:
        moved = forward_o(q, k2, v2, cu, "mxfp8", rule)
        assert torch.equal(moved[:future], outs[rule][:future]), rule
        assert not torch.equal(moved[future:], outs[rule][future:]), rule


def test_summary_judges_no_target_on_a_timing_experiment():
    """Rows that bench.attention marks as a timing experiment (wrong values by design, e.g.
    FLAMIA_UNSAFE_NO_INREG_SCALES=1) are marked and meet no target, however fast."""
    from bench import summary
    run = _run({("u32_1024", 128): {"flamia-mxfp8": 0.5, "cudnn-thd": 1.0}})
    old = _run({("u32_1024", 128): {"flamia-mxfp8": 0.8, "cudnn-thd": 1.0}})
    run["results"][0]["experiment"] = "no in-register row scales: wrong values, timing only"
    (line, ) = summary.verdicts(summary.by_workload(run), summary.experiment_cells(run))
    assert "NOT JUDGED" in line and "timing-experiment rows" in line and "u32_1024" in line
    text = summary.summary(run, old)
    assert "0.500 (2.00x) [experiment], was 0.800 (-37.5%) |" in text
    assert "no in-register row scales" in text and "MET" not in text.replace("NOT JUDGED", "")
    del run["results"][0]["experiment"]  # the same cell as a real run: 2.00x, met
    assert "MET on the workloads" in summary.verdicts(summary.by_workload(run))[0]


def test_target_bound_counts_the_bytes_the_passes_write():
    """bench.target_bound's write bytes are the sizes of the tensors the mxfp8 passes allocate
    (quantize_qkv, the backward's prep buffers, token_major_copies) at a token count with no
    padding, for MHA and GQA; E4M3 data counted at one byte (the interpreter stores it in bf16)."""
    from bench.target_bound import pass_traffic
    from flamia.kernels.attention import QROW
    from flamia.kernels.quantize import (FP8_STORAGE, mx_token_buffers, quantize_qkv,
                                         token_major_copies)

    total, d = 128, 32
    for hq, hkv in ((2, 2), (4, 1)):
        q, k, v, do = (torch.randn(total, h, d, dtype=torch.bfloat16) for h in (hq, hkv, hkv, hq))
        nbytes = lambda ts: sum(t.numel() * t.element_size() for t in ts)
        written = lambda ts: sum(t.numel() * (1 if t.dtype == FP8_STORAGE else t.element_size())
                                 for t in ts)
        traffic = pass_traffic(total, hq, hkv, d)
        outs = quantize_qkv(q, k, v, qk_nvfp4=False)
        assert traffic["quantize"] == (nbytes((q, k, v)), written(outs))
        q8, k8 = outs[0], outs[2]
        assert traffic["copies"] == (written((q8, k8)), written(token_major_copies(q8, k8)))
        delta = torch.empty(hq, total)  # and the per-query rows, as attention_bwd allocates them
        qrow = torch.empty(hq, total, QROW)
        o, lse, sq = torch.empty_like(do), torch.empty(hq, total), outs[1]
        assert traffic["prep"] == (nbytes((do, o, lse, sq)),
                                   written(mx_token_buffers(do) + (delta, qrow)))


def test_target_bound_of_a_run(tmp_path, capsys):
    """The bound and the rate the target needs, by hand for one workload; a GPU without peaks and
    a run without mxfp8's profile are refused."""
    from bench import target_bound as tb
    from bench.attention import causal_flops, packed_lengths

    run = _run({("u32_1024", 128): {"flamia-mxfp8": 2.0, "flamia-bf16": 1.2, "cudnn-thd": 1.3}},
               gpu="NVIDIA H200")
    lengths = packed_lengths("u32_1024", 4, 8192)
    for row in run["results"]:
        row["segments"] = len(lengths)
    mx, bf16 = run["results"][0], run["results"][1]
    mx["profile_ms"] = {"_attn_fwd_kernel": 0.4, "_attn_bwd_dq_kernel": 1.0,
                        "_quantize_qkv_kernel": 0.2, "_attn_bwd_prep8_kernel": 0.1}
    bf16["profile_ms"] = {"_attn_fwd_hopper_persistent_kernel": 1.1}
    (b, ) = tb.workload_bounds(run, 1.3, tb.PEAKS["H200"])
    flops = 3.5 * causal_flops(lengths, 16, 128)
    fewest = tb.pass_bytes(4 * 8192, 16, 16, 128)["fewest"]
    assert b["judged"] and b["baseline"] == "cudnn-thd"
    assert b["bound_ms"] == pytest.approx((fewest / 4.8e12 + flops / 1979e12) * 1e3)
    assert b["passes_ms"] == pytest.approx(0.3)
    assert b["attention_tflops"] == pytest.approx(flops / 1.4e-3 * 1e-12)
    assert b["need_tflops"] == pytest.approx(flops / ((1.3 / 1.3 - 0.3) * 1e-3) * 1e-12)
    assert b["need_share"] == pytest.approx(b["need_tflops"] / 1979)
    assert b["bf16_share"] == pytest.approx(flops / 1.1e-3 / 989e12)
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run))
    assert tb.main([str(path)]) == 0
    assert "| u32_1024 4x8192 16/16 D128 * | 1.300 (cudnn-thd) | 1.000 |" in capsys.readouterr().out
    run["env"]["gpu"] = "GPU A"
    path.write_text(json.dumps(run))
    with pytest.raises(SystemExit, match="has no peaks here"):
        tb.main([str(path)])
    assert tb.main([str(path), "--bandwidth-tbs", "4.8", "--fp8-tflops", "1979",
                    "--bf16-tflops", "989"]) == 0
    mx["experiment"] = "no in-register row scales: wrong values, timing only"
    (b, ) = tb.workload_bounds(run, 1.3, tb.PEAKS["H200"])
    assert not b["judged"] and b["workload"].endswith("[experiment]")
    del mx["profile_ms"]
    path.write_text(json.dumps(run))
    with pytest.raises(SystemExit, match="no workload with flamia-mxfp8's profile"):
        tb.main([str(path), "--bandwidth-tbs", "4.8", "--fp8-tflops", "1979",
                 "--bf16-tflops", "989"])


@pytest.mark.parametrize("scaling", ["mx", "nvfp4", "fp32"])
def test_quantizer_bench_checks_bits_against_the_reference(scaling):
    """bench.quantizer's check passes the quantizer's own output and names what differs when one
    value (or only the sign of a zero) is changed."""
    from bench.quantizer import _bits, _check
    from flamia.kernels.quantize import quantize_qkv

    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(40, h, 32, generator=g).bfloat16() for h in (2, 1, 1))
    q[0, 0, :3] = -1e-4  # rounds to -0 in NVFP4
    outs = quantize_qkv(q, k, v, qk_nvfp4=scaling == "nvfp4", fp32_scale=scaling == "fp32")
    assert _check(outs, q, k, v, scaling) == []
    q8, sq, k8, v8, vt8, skv = (t.clone() for t in outs)
    k8[5, 0, 3] = -k8[5, 0, 3] if k8[5, 0, 3] != 0 else 1.0
    vt8[0, 1, 2] = 0.0 if vt8[0, 1, 2] != 0 else 1.0
    assert _check((q8, sq, k8, v8, vt8, skv), q, k, v, scaling) == ["K data", "V token-major copy"]
    if scaling == "nvfp4":
        q8 = outs[0].clone()
        zero = _bits(q8) == torch.iinfo(torch.int32).min
        assert zero.any()
        q8[zero] = 0.0  # -0 -> +0: the same value, another bit pattern
        assert _check((q8,) + outs[1:], q, k, v, scaling) == ["Q data"]


def test_step_cost_recovers_the_costs_it_was_given(tmp_path, capsys):
    """bench.step_cost fits kernel ms = a * unmasked / SMs + b * masked / SMs + c: on a run whose
    profile was made from known a, b, c per kernel (the step counts its own), it gives them
    back; quantizer kernels are left out; too few workloads are said, not fitted."""
    from bench.attention import packed_lengths
    from bench.step_cost import FP8_TILES, kernel_kind, main, steps

    assert [kernel_kind(n) for n in ("_attn_bwd_dkdv8_hopper_ws_kernel", "_attn_bwd_dq_kernel",
                                     "_attn_fwd_kernel", "_quantize_qkv_kernel")] == [
        "dkdv", "dq", "fwd", None]
    costs = {"_attn_fwd_kernel": (0.6, 0.7, 0.11), "_attn_bwd_dkdv8_hopper_ws_kernel":
             (1.1, 1.4, 0.26)}  # us per step, us per masked step, ms per call
    results = []
    for dist in ("one_doc", "equal_2k", "u32_1024", "lognormal_1k", "u1024_8192"):
        counts = steps(packed_lengths(dist, 1, 4096), FP8_TILES)
        profile = {"_quantize_qkv_kernel": 0.17}
        for name, (a, b, c) in costs.items():
            u, m = counts[kernel_kind(name)]
            profile[name] = (a * u * 16 + b * m * 16) / 132 / 1e3 + c
        results.append({"workload": dist, "rows": 1, "L": 4096, "provider": "flamia-mxfp8",
                        "D": 128, "Hq": 16, "Hkv": 16, "profile_ms": profile})
    results.append({**results[0], "provider": "flamia-bf16"})
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"results": results}))
    main([str(run), "--providers", "flamia-mxfp8", "flamia-bf16"])
    out = capsys.readouterr().out
    for name, (a, b, c) in costs.items():
        row = next(line for line in out.splitlines() if line.startswith(f"| {name} "))
        got = [float(x) for x in row.split("|")[2:5]]
        assert got == pytest.approx([a, b, c], abs=2e-3), row
    assert "_quantize_qkv_kernel" not in out
    assert "flamia-bf16: 1 profiled" in out
