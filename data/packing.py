"""Document packing into fixed-length rows (DESIGN.md section 1), and a resumable loader.

A document of n tokens t_1..t_n becomes n + 1 (input, label) pairs:
    inputs  BOS t_1 ... t_n
    labels  t_1 ... t_n EOS
so the last label of a document is its EOS and no label crosses into the next document. Pairs are
laid into rows of exactly seq_len, no padding; a document that does not fit in what is left of a
row is cut, and its rest continues as an independent segment at the start of the next row(s).
`positions` count from 0 within each segment, so every row starts a new segment and
`cu_seqlens` (varlen layout over the flattened batch) is derived from positions alone.

The loader is deterministic and resumable: documents are visited in a per-epoch permutation
(numpy PCG64 seeded by (seed, epoch)); data-parallel rank r of w reads the permutation's entries
r, r + w, r + 2w, ... (disjoint across ranks). Its whole state is (epoch, document cursor, offset
into the current document): `state_dict()` / `load_state_dict()` resume exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .shards import Shards


def cu_seqlens_from_positions(positions: torch.Tensor) -> torch.Tensor:
    """int32 cu_seqlens over the flattened [B, L] batch: a segment starts where position == 0."""
    flat = positions.reshape(-1)
    starts = torch.nonzero(flat == 0).reshape(-1)
    if starts.numel() == 0 or starts[0] != 0:
        raise ValueError("positions must start at 0 (every row starts a new segment)")
    end = torch.tensor([flat.numel()], device=flat.device, dtype=starts.dtype)
    return torch.cat([starts, end]).to(torch.int32)


def max_seqlen_from_cu_seqlens(cu_seqlens: torch.Tensor) -> int:
    return int((cu_seqlens[1:] - cu_seqlens[:-1]).max())


@dataclass
class LoaderState:
    epoch: int = 0
    doc_cursor: int = 0  # index into this rank's document order
    doc_offset: int = 0  # pairs of the current document already emitted


class PackedLoader:
    """Batches {input_ids, labels, positions} of shape [batch_size, seq_len] (int64)."""

    def __init__(self, shards: Shards, seq_len: int, batch_size: int, rank: int = 0,
                 world_size: int = 1, seed: int = 0):
        if seq_len < 2 or batch_size < 1:
            raise ValueError(f"seq_len must be >= 2 and batch_size >= 1, got {seq_len}, "
                             f"{batch_size}")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} out of range for world_size {world_size}")
        n_docs = len(shards)
        if n_docs < world_size:
            raise ValueError(f"the corpus has {n_docs} documents, fewer than the {world_size} "
                             f"data-parallel ranks: each rank needs at least one document")
        self.shards, self.seq_len, self.batch_size = shards, seq_len, batch_size
        self.rank, self.world_size, self.seed = rank, world_size, seed
        self.state = LoaderState()
        lengths = shards.lengths()
        # Pairs available to the least-served rank in one epoch (a worst case over permutations
        # would need the sort; the per-rank share of the total is what matters for repetition).
        per_rank_pairs = (lengths + 1).sum() // world_size
        if per_rank_pairs < seq_len * batch_size:
            raise ValueError(
                f"the corpus is smaller than one batch: about {per_rank_pairs} (input, label) "
                f"pairs per rank per epoch, a batch needs {seq_len * batch_size} "
                f"({batch_size} x {seq_len}); use a larger corpus or a smaller batch"
            )
        self._order_epoch = -1
        self._order = np.empty(0, dtype=np.int64)

    # -- document order -----------------------------------------------------------------
    def _rank_order(self, epoch: int) -> np.ndarray:
        if epoch != self._order_epoch:
            rng = np.random.Generator(np.random.PCG64([self.seed, epoch]))
            perm = rng.permutation(len(self.shards))
            self._order = perm[self.rank::self.world_size]
            self._order_epoch = epoch
        return self._order

    # -- batches --------------------------------------------------------------------------
    def next_batch(self) -> dict[str, torch.Tensor]:
        B, L = self.batch_size, self.seq_len
        inputs = np.empty((B, L), dtype=np.int64)
        labels = np.empty((B, L), dtype=np.int64)
        positions = np.empty((B, L), dtype=np.int64)
        bos, eos = self.shards.bos_id, self.shards.eos_id
        st = self.state
        for row in range(B):
            col = 0
            while col < L:
                order = self._rank_order(st.epoch)
                if st.doc_cursor >= len(order):
                    st.epoch, st.doc_cursor, st.doc_offset = st.epoch + 1, 0, 0
                    continue
                doc = self.shards.doc(int(order[st.doc_cursor]))
                n_pairs = doc.size + 1
                take = min(n_pairs - st.doc_offset, L - col)
                a, b = st.doc_offset, st.doc_offset + take
                # pair j of a document: input (BOS, t_1..t_n)[j], label (t_1..t_n, EOS)[j]
                seg_in = inputs[row, col:col + take]
                seg_lab = labels[row, col:col + take]
                if a == 0:
                    seg_in[0] = bos
                    seg_in[1:] = doc[0:b - 1]
                else:
                    seg_in[:] = doc[a - 1:b - 1]
                if b == n_pairs:
                    seg_lab[:-1] = doc[a:b - 1]
                    seg_lab[-1] = eos
                else:
                    seg_lab[:] = doc[a:b]
                positions[row, col:col + take] = np.arange(take)
                col += take
                if b == n_pairs:
                    st.doc_cursor, st.doc_offset = st.doc_cursor + 1, 0
                else:
                    st.doc_offset = b
        return {"input_ids": torch.from_numpy(inputs), "labels": torch.from_numpy(labels),
                "positions": torch.from_numpy(positions)}

    def __iter__(self):
        while True:
            yield self.next_batch()

    # -- resumption -----------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {"epoch": self.state.epoch, "doc_cursor": self.state.doc_cursor,
                "doc_offset": self.state.doc_offset, "seed": self.seed, "rank": self.rank,
                "world_size": self.world_size, "seq_len": self.seq_len,
                "batch_size": self.batch_size, "documents": len(self.shards)}

    def load_state_dict(self, sd: dict) -> None:
        for key in ("seed", "world_size", "seq_len", "batch_size", "documents"):
            mine = getattr(self, key) if key != "documents" else len(self.shards)
            if sd.get(key) != mine:
                raise ValueError(f"loader state was saved with {key}={sd.get(key)}, this loader "
                                 f"has {key}={mine}: resuming would not see the same batches")
        self.state = LoaderState(sd["epoch"], sd["doc_cursor"], sd["doc_offset"])
