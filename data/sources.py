"""Document sources: the embedded default corpora (real text from Debian packages, fetched
through the package registry this project's machines reach) and Hugging Face `datasets` inputs.

Embedded corpora (fetched on first use with `apt-get download` + `dpkg-deb -x`, no root needed
for the extraction, cached under $FLAMIA_CACHE or ~/.cache/flamia):

    python-docs  Debian `python3.11-doc`: the reStructuredText sources of the Python 3.11
                 documentation (English prose with code), 497 documents, 12 MB, ~3M tokens.
                 PSF License. 12.6 MB download. The small slice for CPU tests and debug runs.
    linux        Debian `linux-source-6.1`: the Linux 6.1 source tree, each file of
                 Documentation/ (English prose, reST/txt) and each .c/.h file a document:
                 ~1.2 GB of text, several hundred million tokens. GPL-2.0. 139 MB download.
    default      python-docs followed by linux.

Every document is yielded as (doc_id, text). Files that are not valid UTF-8 are decoded with
replacement characters and counted (`SourceStats.non_utf8`); empty documents are skipped and
counted (`SourceStats.empty`): nothing is dropped without being counted.
"""

from __future__ import annotations

import glob
import os
import subprocess
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

DEBIAN_PACKAGES = {"python-docs": "python3.11-doc", "linux": "linux-source-6.1"}
EMBEDDED = ("python-docs", "linux", "default")
LINUX_SUFFIXES = (".c", ".h", ".rst", ".txt")


@dataclass
class SourceStats:
    documents: int = 0
    empty: int = 0
    non_utf8: int = 0
    skipped_files: list[str] = field(default_factory=list)


def cache_dir() -> Path:
    root = Path(os.environ.get("FLAMIA_CACHE", Path.home() / ".cache" / "flamia"))
    root.mkdir(parents=True, exist_ok=True)
    return root


def fetch_debian_package(package: str) -> Path:
    """Download and unpack a Debian package into the cache; returns the unpacked root."""
    root = cache_dir() / "debian" / package
    done = root / ".complete"
    if done.exists():
        return root
    root.mkdir(parents=True, exist_ok=True)
    debs = glob.glob(str(root / f"{package}_*.deb"))
    if not debs:
        download = lambda: subprocess.run(["apt-get", "download", package], cwd=root,
                                          capture_output=True, text=True)
        proc = download()
        if proc.returncode != 0:  # a fresh machine may have no package lists yet
            subprocess.run(["apt-get", "update", "-qq"], capture_output=True, text=True)
            proc = download()
        debs = glob.glob(str(root / f"{package}_*.deb"))
        if proc.returncode != 0 or not debs:
            raise RuntimeError(
                f"could not download the Debian package {package!r} (apt-get download exited "
                f"{proc.returncode}: {proc.stderr.strip()[-300:]}). The embedded corpora need "
                f"Debian's package registry; run `apt-get update` first, or use local files "
                f"(--data.path)."
            )
    subprocess.run(["dpkg-deb", "-x", debs[0], str(root / "x")], check=True)
    done.write_text(os.path.basename(debs[0]))
    return root


def _decode(raw: bytes, stats: SourceStats) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        stats.non_utf8 += 1
        return raw.decode("utf-8", errors="replace")


def _emit(doc_id: str, text: str, stats: SourceStats):
    if not text.strip():
        stats.empty += 1
        return None
    stats.documents += 1
    return doc_id, text


def python_docs(stats: SourceStats) -> Iterator[tuple[str, str]]:
    root = fetch_debian_package(DEBIAN_PACKAGES["python-docs"]) / "x"
    files = sorted(root.glob("usr/share/doc/python3.11/html/_sources/**/*.rst.txt"))
    if not files:
        raise RuntimeError(f"no reST sources found under {root}: the package layout changed")
    for f in files:
        doc = _emit(f"python-docs/{f.name}", _decode(f.read_bytes(), stats), stats)
        if doc:
            yield doc


def linux_source(stats: SourceStats) -> Iterator[tuple[str, str]]:
    root = fetch_debian_package(DEBIAN_PACKAGES["linux"]) / "x"
    tars = sorted(root.glob("usr/src/linux-source-*.tar.xz"))
    if not tars:
        raise RuntimeError(f"no linux-source tarball under {root}: the package layout changed")
    with tarfile.open(tars[0], "r|xz") as tar:  # streamed: never unpacked to disk
        for member in tar:
            if not member.isfile() or not member.name.endswith(LINUX_SUFFIXES):
                continue
            fh = tar.extractfile(member)
            if fh is None:
                stats.skipped_files.append(member.name)
                continue
            doc = _emit(f"linux/{member.name}", _decode(fh.read(), stats), stats)
            if doc:
                yield doc


def local_files(path: str, stats: SourceStats, text_field: str = "text"):
    """JSONL / JSON / Parquet / plain-text files (a file, a directory or a glob) through Hugging
    Face `datasets`; each record (each file, for .txt) is a document."""
    paths = sorted(glob.glob(os.path.join(path, "**", "*"), recursive=True)) if os.path.isdir(
        path) else sorted(glob.glob(path))
    paths = [p for p in paths if os.path.isfile(p)]
    if not paths:
        raise FileNotFoundError(f"no data files at {path!r} (a file, a directory or a glob)")
    kinds = {os.path.splitext(p)[1].lower() for p in paths}
    if kinds <= {".txt", ".text", ".md", ".rst"}:
        for p in paths:
            doc = _emit(p, _decode(Path(p).read_bytes(), stats), stats)
            if doc:
                yield doc
        return
    builder = {".jsonl": "json", ".json": "json", ".parquet": "parquet"}
    fmt = {builder.get(k) for k in kinds}
    if None in fmt or len(fmt) != 1:
        raise ValueError(f"unsupported or mixed file types {sorted(kinds)} at {path!r}; accepted: "
                         ".jsonl/.json, .parquet, or plain text (.txt/.md/.rst)")
    yield from hf_dataset(fmt.pop(), stats, text_field=text_field, data_files=paths)


def hf_dataset(name: str, stats: SourceStats, text_field: str = "text", split: str = "train",
               streaming: bool = True, **kwargs):
    """Any Hugging Face dataset (a hub name where a network allows it, or a builder such as
    "json" with data_files), streamed; ``text_field`` holds the document."""
    import datasets

    ds = datasets.load_dataset(name, split=split, streaming=streaming, **kwargs)
    for i, rec in enumerate(ds):
        if text_field not in rec:
            raise KeyError(f"record {i} of {name!r} has no field {text_field!r}; fields: "
                           f"{sorted(rec)}")
        doc = _emit(f"{name}/{i}", rec[text_field] or "", stats)
        if doc:
            yield doc


def documents(source: str, stats: SourceStats | None = None, **kwargs):
    """Documents of an embedded corpus name, or of local files / a dataset ("hf:NAME")."""
    stats = stats if stats is not None else SourceStats()
    if source == "python-docs":
        return python_docs(stats)
    if source == "linux":
        return linux_source(stats)
    if source == "default":
        return (d for gen in (python_docs(stats), linux_source(stats)) for d in gen)
    if source.startswith("hf:"):
        return hf_dataset(source[3:], stats, **kwargs)
    return local_files(source, stats, **kwargs)
