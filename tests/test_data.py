"""Data pipeline: packing invariants (random and real documents), cu_seqlens from positions,
resume equality, rank disjointness, determinism, tokenizer round trip, bad input."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from data.packing import PackedLoader, cu_seqlens_from_positions
from data.shards import Shards, write_shards
from data.sources import SourceStats, local_files

BOS, EOS, VOCAB = 0, 1, 1000


def make_shards(tmp_path, lengths, seed=0):
    rng = np.random.default_rng(seed)
    docs = [rng.integers(2, VOCAB, size=n) for n in lengths]
    return Shards(write_shards(tmp_path / f"s{seed}-{len(lengths)}", docs, BOS, EOS, VOCAB)), docs


def check_batch_invariants(batch, L):
    inp, lab, pos = batch["input_ids"], batch["labels"], batch["positions"]
    B = inp.shape[0]
    assert inp.shape == lab.shape == pos.shape == (B, L)
    assert torch.all(pos[:, 0] == 0), "every row starts a new segment"
    cu = cu_seqlens_from_positions(pos)
    assert cu[0] == 0 and cu[-1] == B * L and torch.all(cu[1:] > cu[:-1])
    flat_pos = pos.reshape(-1)
    for a, b in zip(cu[:-1].tolist(), cu[1:].tolist()):
        assert a // L == (b - 1) // L, "a segment never crosses a row"
        assert torch.equal(flat_pos[a:b], torch.arange(b - a)), "positions count from 0"
    # labels are the next input inside a segment, except at a document end (EOS)
    flat_in, flat_lab = inp.reshape(-1), lab.reshape(-1)
    for a, b in zip(cu[:-1].tolist(), cu[1:].tolist()):
        nxt = flat_in[a + 1:b]
        cur = flat_lab[a:b - 1]
        assert torch.all((cur == nxt) | (cur == EOS)), "a label crosses into another document"
        # a document starting inside a segment follows one that ended with EOS
        assert torch.all(cur[nxt == BOS] == EOS)
    return cu


def replay_documents(loader, docs, n_batches):
    """Concatenate the emitted (input, label) pairs and cut them back into documents."""
    inputs, labels = [], []
    for _ in range(n_batches):
        b = loader.next_batch()
        check_batch_invariants(b, loader.seq_len)
        inputs.append(b["input_ids"].reshape(-1))
        labels.append(b["labels"].reshape(-1))
    return torch.cat(inputs), torch.cat(labels)


@settings(max_examples=25, deadline=None)
@given(lengths=st.lists(st.integers(1, 300), min_size=3, max_size=40),
       L=st.sampled_from([16, 33, 64]), B=st.integers(1, 3))
def test_packing_reproduces_documents(tmp_path_factory, lengths, L, B):
    shards, docs = make_shards(tmp_path_factory.mktemp("pack"), lengths)
    if sum(lengths) + len(lengths) < L * B:
        with pytest.raises(ValueError, match="smaller than one batch"):
            PackedLoader(shards, L, B)
        return
    loader = PackedLoader(shards, L, B, seed=3)
    order = loader._rank_order(0)
    total_pairs = sum(len(d) + 1 for d in docs)
    n_batches = max(1, total_pairs // (L * B))
    inp, lab = replay_documents(loader, docs, n_batches)
    expect_in = torch.cat([torch.tensor(np.r_[BOS, docs[i]]) for i in order])
    expect_lab = torch.cat([torch.tensor(np.r_[docs[i], EOS]) for i in order])
    n = min(inp.numel(), expect_in.numel())
    assert torch.equal(inp[:n], expect_in[:n])
    assert torch.equal(lab[:n], expect_lab[:n])


def test_document_longer_than_many_rows(tmp_path):
    shards, docs = make_shards(tmp_path, [1000, 5])
    loader = PackedLoader(shards, 64, 2, seed=0)
    batches = [loader.next_batch() for _ in range(8)]
    for b in batches:
        check_batch_invariants(b, 64)
    inp = torch.cat([b["input_ids"].reshape(-1) for b in batches])
    first = loader._rank_order(0)[0]
    expect = torch.tensor(np.r_[BOS, docs[first]])[: inp.numel()]
    assert torch.equal(inp[: expect.numel()], expect)


def test_resume_equals_uninterrupted(tmp_path):
    shards, _ = make_shards(tmp_path, list(range(5, 400, 7)))
    straight = PackedLoader(shards, 48, 2, seed=11)
    want = [straight.next_batch() for _ in range(12)]
    first = PackedLoader(shards, 48, 2, seed=11)
    for _ in range(5):
        first.next_batch()
    state = first.state_dict()
    resumed = PackedLoader(shards, 48, 2, seed=11)
    resumed.load_state_dict(state)
    got = [resumed.next_batch() for _ in range(7)]
    for a, b in zip(want[5:], got):
        for key in a:
            assert torch.equal(a[key], b[key])


def test_resume_rejects_mismatched_loader(tmp_path):
    shards, _ = make_shards(tmp_path, list(range(5, 400, 7)))
    sd = PackedLoader(shards, 48, 2, seed=11).state_dict()
    with pytest.raises(ValueError, match="seed"):
        PackedLoader(shards, 48, 2, seed=12).load_state_dict(sd)


def test_ranks_read_disjoint_documents(tmp_path):
    shards, _ = make_shards(tmp_path, [50] * 30)
    orders = [PackedLoader(shards, 32, 1, rank=r, world_size=3, seed=5)._rank_order(0)
              for r in range(3)]
    sets = [set(o.tolist()) for o in orders]
    assert not (sets[0] & sets[1]) and not (sets[1] & sets[2]) and not (sets[0] & sets[2])
    assert set().union(*sets) == set(range(30))


def test_fixed_seed_identical_batches_other_seed_differs(tmp_path):
    shards, _ = make_shards(tmp_path, list(range(5, 400, 7)))
    a = PackedLoader(shards, 32, 2, seed=1).next_batch()["input_ids"]
    b = PackedLoader(shards, 32, 2, seed=1).next_batch()["input_ids"]
    c = PackedLoader(shards, 32, 2, seed=2).next_batch()["input_ids"]
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_cu_seqlens_from_positions_rejects_bad_positions():
    with pytest.raises(ValueError, match="start at 0"):
        cu_seqlens_from_positions(torch.tensor([[1, 2, 0]]))


def test_bad_inputs(tmp_path):
    with pytest.raises(ValueError, match="smaller than one batch"):
        PackedLoader(make_shards(tmp_path, [3, 4])[0], 64, 4)
    with pytest.raises(ValueError, match="fewer than"):
        PackedLoader(make_shards(tmp_path, [300])[0], 8, 1, rank=0, world_size=2)
    with pytest.raises(FileNotFoundError):
        list(local_files(str(tmp_path / "missing" / "*.jsonl"), SourceStats()))
    with pytest.raises(FileNotFoundError, match="meta.json"):
        Shards(tmp_path)
    # empty documents and non-UTF-8 bytes are counted, not silently dropped or crashing
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_bytes(b"caf\xe9 ok")
    (tmp_path / "docs" / "b.txt").write_text("   \n")
    (tmp_path / "docs" / "c.txt").write_text("hello")
    stats = SourceStats()
    docs = list(local_files(str(tmp_path / "docs"), stats))
    assert [d[1] for d in docs] == ["caf\ufffd ok", "hello"]
    assert stats.documents == 2 and stats.empty == 1 and stats.non_utf8 == 1


def test_jsonl_through_datasets(tmp_path):
    f = tmp_path / "c.jsonl"
    f.write_text('{"text": "first doc"}\n{"text": ""}\n{"text": "second"}\n')
    stats = SourceStats()
    docs = list(local_files(str(f), stats))
    assert [d[1] for d in docs] == ["first doc", "second"] and stats.empty == 1


def test_real_corpus_tokenizer_and_packing():
    """Real text (Debian python3.11-doc): tokenizer round trip and packing invariants."""
    from data.shards import build_shards
    from data.sources import documents
    from data.tokenizer import BPETokenizer, train_tokenizer

    tok_dir = train_tokenizer("python-docs", 8192)
    tok = BPETokenizer(tok_dir)
    texts = [t for _, t in zip(range(20), (d[1] for d in documents("python-docs")))]
    for t in texts:
        assert tok.decode(tok.encode(t)) == t
    assert tok.decode(tok.encode("ünïcödé → 🚀 \x00 tabs\t")) == "ünïcödé → 🚀 \x00 tabs\t"
    shards = Shards(build_shards("python-docs", tok_dir))
    assert shards.meta["documents"] > 400 and shards.meta["tokens"] > 2_000_000
    loader = PackedLoader(shards, 512, 4, seed=0)
    for _ in range(5):
        check_batch_invariants(loader.next_batch(), 512)
