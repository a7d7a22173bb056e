"""Which of a fixed set of ASCII literals each text of a column holds, as one compiled Aho-Corasick pass.

Decontamination canonicalises the function names benchmark items define (`decontam/canon.matcher_norm`): for
the texts a polars `str.contains` of the same literals selects (a SIMD literal search, ~600-1,000 MB/s), it
needs the names each one holds anywhere. polars' `str.extract_many(..., overlapping=True)` gives that at ~320
MB/s on long-CoT responses, where most texts are selected; this pass reads each byte once, at ~660 MB/s there,
and reports the distinct (text, literal) pairs: the same sets as `extract_many` with overlapping matches
(tests/test_decontam_speed.py), so the same renaming.

The automaton is flat tables: bytes to classes (the bytes the literals hold), a (state, class) step table built
in BFS order from the trie with failure links, the states where literals end marked by sign, so the scan makes
one table step per byte and branches only at those states. The scan is compiled as `kernel.py`'s kernels are
(`kernel.compiled`: numba, cached on disk); this module is imported only where the kernel is
(`text/columns.use_kernel`).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from cotforge.curate.text.kernel import compiled, push_pair, utf8_buffers


@lru_cache(maxsize=4)
def automaton(literals: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The Aho-Corasick automaton of `literals` (non-empty ASCII strings) as flat tables: (byte class [256]
    uint8: 0 for bytes no literal holds; step [states x width] int32; output offsets [states + 1] int64;
    output literal ids int32). A state is kept as its row start s * width; reading a byte of class c moves to
    step[row + c], stored as -(row + 1) when literals end at the new state (their ids: out_ids[out_off[s]:
    out_off[s + 1]], its own and its failure chain's), so the scan branches only there."""
    if not all(lit and lit.isascii() for lit in literals):
        raise ValueError("automaton: literals must be non-empty ASCII strings")
    cls = np.zeros(256, dtype=np.uint8)
    for k, b in enumerate(sorted({b for lit in literals for b in lit.encode("ascii")})):
        cls[b] = k + 1
    width = int(cls.max()) + 1
    children: list[dict[int, int]] = [{}]
    own: list[list[int]] = [[]]
    for k, lit in enumerate(literals):
        s = 0
        for b in lit.encode("ascii"):
            c = int(cls[b])
            nxt = children[s].get(c)
            if nxt is None:
                nxt = len(children)
                children[s][c] = nxt
                children.append({})
                own.append([])
            s = nxt
        own[s].append(k)
    n = len(children)
    goto = np.zeros((n, width), dtype=np.int64)
    fail = np.zeros(n, dtype=np.int64)
    outs: list[list[int]] = [[] for _ in range(n)]
    order = [0]
    for s in order:  # BFS: a state's failure state comes earlier in the order, so its row is complete
        if s:
            goto[s] = goto[fail[s]]
        outs[s] = own[s] + outs[fail[s]] if s else own[s]
        for c, child in children[s].items():
            fail[child] = goto[fail[s], c] if s else 0
            goto[s, c] = child
            order.append(child)
    has_out = np.array([bool(o) for o in outs])
    step = np.where(has_out[goto], -(goto * width) - 1, goto * width).astype(np.int32).ravel()
    off = np.zeros(n + 1, dtype=np.int64)
    off[1:] = np.cumsum([len(o) for o in outs])
    ids = np.array([k for o in outs for k in o], dtype=np.int32)
    return cls, step, off, ids


@compiled
def _scan(data, offs, cls, step, width, out_off, out_ids, seen, res_row, res_lit):
    """Distinct (row, literal) pairs into res_row / res_lit in row order; their count, or -1 when the result
    arrays are too small (the caller retries with larger ones). `seen` (one stamp per literal) starts at 0."""
    k = 0
    for r in range(len(offs) - 1):
        row = 0
        stamp = r + 1
        for i in range(offs[r], offs[r + 1]):
            v = step[row + cls[data[i]]]
            if v >= 0:
                row = v
                continue
            row = -v - 1
            s = row // width
            for q in range(out_off[s], out_off[s + 1]):
                lit = out_ids[q]
                if seen[lit] != stamp:
                    seen[lit] = stamp
                    k = push_pair(res_row, res_lit, k, r, lit)
                    if k < 0:
                        return -1
    return k


def find_literals(texts, literals: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(row, literal index) of every distinct literal of `literals` that occurs in each text of `texts` (a list,
    Arrow or polars string column; nulls hold nothing), sorted by row. A text Arrow cannot hold (a lone surrogate)
    is searched as Python text."""
    data, offs, bad = utf8_buffers(texts)
    cls, step, off, ids = automaton(tuple(literals))
    width = int(cls.max()) + 1
    cap = max(1024, 4 * len(offs))
    while True:
        seen = np.zeros(max(len(literals), 1), dtype=np.int64)
        rows, lits = np.empty(cap, dtype=np.int64), np.empty(cap, dtype=np.int32)
        k = _scan(data, offs, cls, step, width, off, ids, seen, rows, lits)
        if k >= 0:
            break
        cap *= 4
    rows, lits = rows[:k], lits[:k]
    if bad:  # rows the kernel saw as "": the literals found by str.find
        texts = list(texts)
        extra = [(r, j) for r in bad for j, lit in enumerate(literals) if lit in (texts[r] or "")]
        if extra:
            rows = np.concatenate([rows, np.array([r for r, _ in extra], dtype=np.int64)])
            lits = np.concatenate([lits, np.array([j for _, j in extra], dtype=np.int32)])
            order = np.argsort(rows, kind="stable")
            rows, lits = rows[order], lits[order]
    return rows, lits
