"""Tokenizer: a byte-level BPE trained with Hugging Face `tokenizers` on the corpus.

No Llama/GPT tokenizer file can be fetched at run time here (no model hub), so the project trains
its own byte-level BPE (GPT-2 style pre-tokenization, every byte representable, so no text is
ever unknown). Training is deterministic for a given corpus, vocabulary size and document budget,
and cached: <cache>/tokenizers/<corpus>-v<vocab>-d<docs>/tokenizer.json, with a
tokenizer_config.json naming BOS/EOS, the layout torchtitan's HuggingFaceTokenizer loads.

Special tokens: <|begin_of_text|> (BOS) and <|end_of_text|> (EOS), ids 0 and 1.
"""

from __future__ import annotations

import json
from pathlib import Path

from .sources import cache_dir, documents

BOS, EOS = "<|begin_of_text|>", "<|end_of_text|>"


def tokenizer_dir(corpus: str, vocab_size: int, max_docs: int) -> Path:
    name = corpus.replace("/", "_").replace(":", "_")
    return cache_dir() / "tokenizers" / f"{name}-v{vocab_size}-d{max_docs}"


def train_tokenizer(corpus: str = "python-docs", vocab_size: int = 8192, max_docs: int = 20000,
                    out_dir: str | Path | None = None) -> Path:
    """Train (or reuse) the BPE; returns the directory holding tokenizer.json."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    if vocab_size < 300:
        raise ValueError(f"vocab_size must be >= 300 (256 bytes + specials + merges), got "
                         f"{vocab_size}")
    out = Path(out_dir) if out_dir else tokenizer_dir(corpus, vocab_size, max_docs)
    if (out / "tokenizer.json").exists():
        return out
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=[BOS, EOS], show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )

    def texts():
        for i, (_, text) in enumerate(documents(corpus)):
            if i >= max_docs:
                break
            yield text

    tok.train_from_iterator(texts(), trainer=trainer)
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / "tokenizer.json.tmp"
    tok.save(str(tmp))
    (out / "tokenizer_config.json").write_text(json.dumps(
        {"bos_token": BOS, "eos_token": EOS, "add_bos_token": False, "add_eos_token": False,
         "model_max_length": 1 << 30, "tokenizer_class": "PreTrainedTokenizerFast"}, indent=1))
    tmp.rename(out / "tokenizer.json")
    return out


class BPETokenizer:
    """Thin wrapper: encode without specials, ids of BOS/EOS, decode."""

    def __init__(self, path: str | Path):
        from tokenizers import Tokenizer

        path = Path(path)
        file = path / "tokenizer.json" if path.is_dir() else path
        if not file.exists():
            raise FileNotFoundError(f"no tokenizer.json at {path}")
        self.tok = Tokenizer.from_file(str(file))
        self.bos_id = self.tok.token_to_id(BOS)
        self.eos_id = self.tok.token_to_id(EOS)
        if self.bos_id is None or self.eos_id is None:
            raise ValueError(f"{file} lacks the special tokens {BOS} / {EOS}")
        self.vocab_size = self.tok.get_vocab_size()

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return [e.ids for e in self.tok.encode_batch(texts, add_special_tokens=False)]

    def encode(self, text: str) -> list[int]:
        return self.tok.encode(text, add_special_tokens=False).ids

    def decode(self, ids) -> str:
        return self.tok.decode(list(ids), skip_special_tokens=False)
