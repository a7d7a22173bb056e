"""Where the text kernel's time goes: `normalize_many` + `hash_words_ngrams` split into their parts, on the same
real texts as bench/text/kernel.py (`long`: long-CoT responses, `short`: problems + solutions).

Parts, each timed alone on the whole batch (best of `--repeat`):
- `to arrow`: the Python list -> one Arrow LargeString column (`kernel._as_arrow`);
- `copy floor`: one compiled pass that reads every input byte and writes it lower-cased (memory + loop floor);
- `decode + table A`: UTF-8 decode and table A into the code-point buffer (the normaliser's first half);
- `normalise kernel`: the whole compiled normaliser (`kernel._run_kernel`: stage A + stage B);
- `wrappers + fallback`: the rest of `normalize_many` (the polars wrapper step, texts handed to `normalize`,
  the result column);
- `padded copy`: the normalised bytes copied into the 8-byte-word buffer the hash kernel reads;
- `word hashes`: `kernel._hash_kernel(..., n=0)` (split + per-word hash, no n-grams);
- `word + 8-gram hashes`: `kernel.hash_words_ngrams(..., 8)`;
- `end to end`: `normalize_many` + `hash_words_ngrams` from the Python list, as the stages call them.
MB = UTF-8 input bytes. It calls the kernel's private steps on purpose (it times them one by one); the stages
call only `normalize_many` / `hash_words_ngrams`. Run under the CPU lock:

    /tmp/tools/heavy python -m bench.text.profile --mb 20
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from bench.text.kernel import load
from cotforge.curate.text import kernel


@kernel._jit
def _copy_floor(data, offs):
    out = np.empty(len(data), dtype=np.uint8)
    for i in range(offs[0], offs[len(offs) - 1]):
        b = data[i]
        out[i] = b + 32 if 65 <= b <= 90 else b
    return out


@kernel._jit
def _decode_a(data, offs, a_off, a_pool, a_flag, amax):
    """Stage A of kernel._normalize_kernel alone (decode + table A), returning the code points written."""
    mid = np.empty(1024, dtype=np.int32)
    total = 0
    for r in range(len(offs) - 1):
        if (offs[r + 1] - offs[r]) * amax > len(mid):
            mid = np.empty((offs[r + 1] - offs[r]) * amax, dtype=np.int32)
        m = 0
        i = offs[r]
        end = offs[r + 1]
        while i < end:
            b0 = data[i]
            if b0 < 0x80:
                mid[m] = b0 + 32 if 65 <= b0 <= 90 else b0
                m += 1
                i += 1
                continue
            if b0 < 0xE0:
                cp = (np.int64(b0 & 0x1F) << 6) | np.int64(data[i + 1] & 0x3F)
                i += 2
            elif b0 < 0xF0:
                cp = (np.int64(b0 & 0x0F) << 12) | (np.int64(data[i + 1] & 0x3F) << 6) | np.int64(data[i + 2] & 0x3F)
                i += 3
            else:
                cp = ((np.int64(b0 & 0x07) << 18) | (np.int64(data[i + 1] & 0x3F) << 12)
                      | (np.int64(data[i + 2] & 0x3F) << 6) | np.int64(data[i + 3] & 0x3F))
                i += 4
            if a_flag[cp] & 1:
                break
            for k in range(a_off[cp], a_off[cp + 1]):
                mid[m] = a_pool[k]
                m += 1
        total += m
    return total


def best(fn, repeat: int) -> float:
    """The fastest of `repeat` timed calls (s)."""
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def parts(texts: list[str], repeat: int) -> list[tuple[str, float]]:
    """(part, seconds) for one batch of texts."""
    arr, _ = kernel._as_arrow(texts)
    data, offs = kernel._buffers(arr)
    t = kernel.tables()
    norm = kernel.normalize_many(texts)
    words, noffs = kernel._word_buffer(norm)
    amax = kernel._max_per_byte()
    out = [
        ("to arrow (list -> LargeString)", best(lambda: kernel._as_arrow(texts), repeat)),
        ("copy floor (read + lower every byte)", best(lambda: _copy_floor(data, offs), repeat)),
        ("decode + table A", best(lambda: _decode_a(data, offs, t["a_off"], t["a_pool"], t["a_flag"], amax),
                                  repeat)),
        ("normalise kernel (A + B)", best(lambda: kernel._run_kernel(arr), repeat)),
        ("normalize_many (all of it)", best(lambda: kernel.normalize_many(texts), repeat)),
        ("padded copy for the hash kernel", best(lambda: kernel._word_buffer(norm), repeat)),
        ("word hashes (n=0)", best(lambda: kernel._hash_kernel(words, noffs, 0, *kernel._hash_outputs(noffs)), repeat)),
        ("word + 8-gram hashes", best(lambda: kernel.hash_words_ngrams(norm, 8), repeat)),
        ("end to end (list -> 8-gram hashes)",
         best(lambda: kernel.hash_words_ngrams(kernel.normalize_many(texts), 8), repeat)),
    ]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=20.0, help="MB of text per kind")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--kinds", default="long,short")
    args = ap.parse_args()
    kernel.normalize_many(["warm \\frac12 x² ```py\n"])
    kernel.hash_words_ngrams(kernel.normalize_many(["a b c d e f g h i"]), 8)
    print("| texts | part | s | MB/s of input | load |")
    print("|---|---|---:|---:|---|")
    for kind in args.kinds.split(","):
        texts = load(kind, args.mb)
        mb = sum(len(x.encode("utf-8")) for x in texts) / 1e6
        ascii_share = sum(x.isascii() for x in texts) / len(texts)
        for label, s in parts(texts, args.repeat):
            print(f"| {kind} ({len(texts)} texts, {mb:.1f} MB, {ascii_share:.0%} ASCII) | {label} | {s:.3f} | "
                  f"{mb / s:.1f} | {os.getloadavg()[0]:.2f} |", flush=True)


if __name__ == "__main__":
    main()
