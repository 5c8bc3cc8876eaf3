#!/usr/bin/env python3
"""Times Hugging Face `tokenizers` on the corpus photon's tokenizer benchmark
used, single-threaded, and checks that its ids equal photon's.

On the machine with `tokenizers` installed (the GPU machine's python3):

  build/tests/bench/photon_tokenizer_bench --model DIR --write-corpus corpus.txt --write-ids photon_ids.txt
  python3 tests/bench/hf_tokenizer_bench.py --tokenizer DIR/tokenizer.json --corpus corpus.txt --ids photon_ids.txt

Without photon on that machine: --repo ROOT builds the same corpus as
photon_tokenizer_bench --repo ROOT (same files, order and repetition);
--write-corpus / --write-ids save it and Hugging Face's ids, for
photon_tokenizer_bench --corpus FILE --write-ids ... elsewhere and a diff.

Chunks are cut exactly as photon_tokenizer_bench cuts them: after the first
newline at or past --chunk bytes (default 4096), so each line of photon's ids
file is one chunk. Each chunk is one encode(chunk, add_special_tokens=False).
Exit status 1 when any chunk's ids differ.
"""
import argparse
import os
import sys
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")  # before tokenizers starts its pool
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from tokenizers import Tokenizer  # noqa: E402


CORPUS_DIRS = ["src", "include", "capi", "examples", "tests", "docs", "scripts"]
CORPUS_EXT = {".cpp", ".hpp", ".h", ".cu", ".cuh", ".c", ".py", ".md", ".txt", ".sh", ".cmake"}
CORPUS_FILES = ["README.md", "LICENSE", "tests/data/tokenizers/llama3/LICENSE", "tests/data/tokenizers/llama3/USE_POLICY.md",
                "tests/data/tokenizers/qwen3/LICENSE", "tests/data/tokenizers/llama3/golden/hf_reference.json",
                "tests/data/tokenizers/qwen3/golden/hf_reference.json",
                "tests/data/tokenizers/llama3/golden/extra_cases.json",
                "tests/data/tokenizers/qwen3/golden/extra_cases.json",
                "tests/data/tokenizers/llama3/golden/ggml-vocab-llama-bpe.gguf.inp", "models/stories260K/SOURCE.md"]


def build_corpus(root: str, min_mb: float) -> bytes:
    """tests/bench/tokenizer_bench.cpp's build_corpus, byte for byte."""
    from pathlib import Path
    rootp = Path(root)
    files = []
    for d in CORPUS_DIRS:
        if not (rootp / d).is_dir():
            continue
        for p in (rootp / d).rglob("*"):
            rel = p.relative_to(rootp).as_posix()
            if p.is_file() and not rel.startswith("tests/data") and p.suffix in CORPUS_EXT:
                files.append(p)
    files += [rootp / f for f in CORPUS_FILES if (rootp / f).exists()]
    files.sort(key=lambda p: p.parts)  # std::filesystem::path order: element by element
    once = b"".join(p.read_bytes() for p in files)
    out = bytearray()
    while once and len(out) < int(min_mb * 1e6):
        out += once
    return bytes(out)


def chunks_of(data: bytes, chunk: int):
    out, start = [], 0
    while start < len(data):
        end = start + chunk
        if end >= len(data):
            end = len(data)
        else:
            nl = data.find(b"\n", end)
            end = len(data) if nl < 0 else nl + 1
        out.append(data[start:end])
        start = end
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer", required=True, help="path of tokenizer.json")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--corpus", help="the corpus file photon_tokenizer_bench --write-corpus wrote")
    src.add_argument("--repo", help="build the corpus from this repository root instead")
    ap.add_argument("--min-mb", type=float, default=4.0)
    ap.add_argument("--write-corpus", help="save the corpus here")
    ap.add_argument("--write-ids", help="save Hugging Face's ids here (one line per chunk)")
    ap.add_argument("--ids", help="photon's ids (--write-ids): one line of space-separated ids per chunk")
    ap.add_argument("--chunk", type=int, default=4096)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()

    t0, c0 = time.perf_counter(), time.process_time()
    tok = Tokenizer.from_file(args.tokenizer)
    load_wall, load_cpu = time.perf_counter() - t0, time.process_time() - c0

    data = open(args.corpus, "rb").read() if args.corpus else build_corpus(args.repo, args.min_mb)
    if args.write_corpus:
        open(args.write_corpus, "wb").write(data)
    texts = [c.decode("utf-8") for c in chunks_of(data, args.chunk)]
    mb = len(data) / 1e6

    best_wall = best_cpu = float("inf")
    ids = []
    for _ in range(max(1, args.runs)):
        t0, c0 = time.perf_counter(), time.process_time()
        ids = [tok.encode(t, add_special_tokens=False).ids for t in texts]
        best_wall = min(best_wall, time.perf_counter() - t0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    n_tokens = sum(len(x) for x in ids)

    flat = [i for x in ids for i in x]
    t0 = time.perf_counter()
    text = tok.decode(flat, skip_special_tokens=False)
    dec_wall = time.perf_counter() - t0

    stream_ns = None
    try:
        from tokenizers.decoders import DecodeStream
        stream = DecodeStream(skip_special_tokens=False)
        c0 = time.process_time()
        for i in flat:
            stream.step(tok, i)
        stream_ns = (time.process_time() - c0) * 1e9 / max(1, len(flat))
    except ImportError:
        pass

    import tokenizers
    print(f"tokenizers {tokenizers.__version__}: {args.tokenizer}")
    print(f"  corpus {mb:.2f} MB in {len(texts)} chunks, {n_tokens} tokens")
    print(f"  load {load_wall:.3f} s wall, {load_cpu:.3f} s cpu")
    print(f"  encode {mb / best_wall:.2f} MB/s wall, {mb / best_cpu:.2f} MB/s cpu (single thread, best of {args.runs})")
    print(f"  decode {len(text.encode()) / 1e6 / dec_wall:.1f} MB/s wall"
          + (f" | DecodeStream {stream_ns:.1f} ns/token cpu" if stream_ns is not None else ""))

    if args.write_ids:
        with open(args.write_ids, "w") as f:
            for x in ids:
                f.write(" ".join(map(str, x)) + "\n")
    if args.ids:
        with open(args.ids) as f:
            theirs = [[int(v) for v in line.split()] for line in f]
        if len(theirs) != len(ids):
            print(f"  ids: photon wrote {len(theirs)} chunks, expected {len(ids)}")
            return 1
        bad = [k for k, (a, b) in enumerate(zip(ids, theirs)) if a != b]
        if bad:
            k = bad[0]
            first = next(j for j, (a, b) in enumerate(zip(ids[k] + [None], theirs[k] + [None])) if a != b)
            print(f"  ids: {len(bad)} of {len(ids)} chunks differ; first: chunk {k}, token {first}: "
                  f"hf {ids[k][first:first + 5]} photon {theirs[k][first:first + 5]}")
            return 1
        print(f"  ids: identical to photon's for all {len(ids)} chunks ({n_tokens} tokens)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
