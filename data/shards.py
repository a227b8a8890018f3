"""Pre-tokenized shard cache: tokenization off the training hot path.

A shard directory holds
    tokens.bin        every document's tokens back to back (uint16 when the vocabulary fits,
                      else uint32), memory-mapped at load time
    doc_offsets.npy   int64 [n_docs + 1]: document d is tokens[offsets[d]:offsets[d + 1]]
    meta.json         corpus, tokenizer, counts (documents, tokens, empty and non-UTF-8 inputs)
Documents are stored without BOS/EOS; the packer adds them.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import numpy as np

from .sources import SourceStats, cache_dir, documents
from .tokenizer import BPETokenizer

ENCODE_BATCH = 256


def shard_dir(corpus: str, tokenizer_path: Path, max_docs: int | None) -> Path:
    name = corpus.replace("/", "_").replace(":", "_")
    return cache_dir() / "shards" / f"{name}--{Path(tokenizer_path).name}--d{max_docs or 'all'}"


def build_shards(corpus: str, tokenizer_path: str | Path, out: str | Path | None = None,
                 max_docs: int | None = None, **source_kwargs) -> Path:
    """Tokenize ``corpus`` into a shard directory (reused when complete)."""
    tok = BPETokenizer(tokenizer_path)
    out = Path(out) if out else shard_dir(corpus, Path(tokenizer_path), max_docs)
    if (out / "meta.json").exists():
        return out
    out.mkdir(parents=True, exist_ok=True)
    dtype = np.uint16 if tok.vocab_size <= np.iinfo(np.uint16).max + 1 else np.uint32
    stats = SourceStats()
    offsets = [0]
    with open(out / "tokens.bin.tmp", "wb") as f:
        batch: list[str] = []

        def flush():
            for ids in tok.encode_batch(batch):
                arr = np.asarray(ids, dtype=dtype)
                f.write(arr.tobytes())
                offsets.append(offsets[-1] + arr.size)
            batch.clear()

        for i, (_, text) in enumerate(documents(corpus, stats, **source_kwargs)):
            if max_docs is not None and i >= max_docs:
                break
            batch.append(text)
            if len(batch) == ENCODE_BATCH:
                flush()
        flush()
    if len(offsets) == 1:
        raise ValueError(f"corpus {corpus!r} produced no documents ({asdict(stats)})")
    (out / "tokens.bin.tmp").rename(out / "tokens.bin")
    np.save(out / "doc_offsets.npy", np.asarray(offsets, dtype=np.int64))
    meta = {"corpus": corpus, "tokenizer": str(tokenizer_path), "dtype": np.dtype(dtype).name,
            "documents": len(offsets) - 1, "tokens": int(offsets[-1]),
            "bos_id": tok.bos_id, "eos_id": tok.eos_id, "vocab_size": tok.vocab_size,
            "source_stats": asdict(stats)}
    (out / "meta.json").write_text(json.dumps(meta, indent=1))
    return out


def write_shards(out: str | Path, docs, bos_id: int, eos_id: int, vocab_size: int,
                 **meta_extra) -> Path:
    """Write already-tokenized documents (an iterable of int sequences) as a shard directory."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    dtype = np.uint16 if vocab_size <= np.iinfo(np.uint16).max + 1 else np.uint32
    offsets = [0]
    with open(out / "tokens.bin", "wb") as f:
        for ids in docs:
            arr = np.asarray(ids, dtype=dtype)
            f.write(arr.tobytes())
            offsets.append(offsets[-1] + arr.size)
    np.save(out / "doc_offsets.npy", np.asarray(offsets, dtype=np.int64))
    meta = {"dtype": np.dtype(dtype).name, "documents": len(offsets) - 1,
            "tokens": int(offsets[-1]), "bos_id": bos_id, "eos_id": eos_id,
            "vocab_size": vocab_size, **meta_extra}
    (out / "meta.json").write_text(json.dumps(meta, indent=1))
    return out


class Shards:
    """Memory-mapped view of a shard directory."""

    def __init__(self, path: str | Path):
        path = Path(path)
        if not (path / "meta.json").exists():
            raise FileNotFoundError(f"{path} is not a complete shard directory (no meta.json); "
                                    f"build it with data.shards.build_shards")
        self.meta = json.loads((path / "meta.json").read_text())
        self.tokens = np.memmap(path / "tokens.bin", dtype=self.meta["dtype"], mode="r")
        self.offsets = np.load(path / "doc_offsets.npy")
        self.bos_id, self.eos_id = self.meta["bos_id"], self.meta["eos_id"]

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def doc(self, i: int) -> np.ndarray:
        return self.tokens[self.offsets[i]:self.offsets[i + 1]]

    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)
