"""Which of a fixed set of ASCII literals each text of a column holds, as one compiled Aho-Corasick pass.

Decontamination canonicalises the function names benchmark items define (`decontam/canon.matcher_norm`): a
batch needs, per text, the names (or for plain-word names the call `name(`) that occur in it anywhere. polars'
`str.extract_many(..., overlapping=True)` gives that at ~200 MB/s, after a `str.contains` of the same literals
that picks the texts to search; on long-CoT responses nearly every text holds one, so both passes read almost
every byte. This automaton reads each byte once (one table lookup per byte) and reports the distinct
(text, literal) pairs: the same sets as `extract_many` with overlapping matches, so the same renaming.

The automaton is a dense table (states x 256 bytes, built in BFS order from the trie with failure links), so the
scan has no branch per byte but a lookup; literals are ASCII, so a byte match is a character match in UTF-8.
The scan is compiled as `kernel.py`'s kernels are (`kernel.compiled`: numba, cached on disk); this module is imported only
where the kernel is (`text/columns.use_kernel`).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from cotforge.curate.text.kernel import compiled, utf8_buffers


@lru_cache(maxsize=4)
def automaton(literals: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(goto [states, 256] int32, output offsets [states + 1] int64, output literal ids int32) of `literals`
    (non-empty ASCII strings): state s reading byte b goes to goto[s, b]; the literals ending at state s are
    out_ids[out_off[s]:out_off[s + 1]] (its own and those of its failure chain)."""
    if not all(lit and lit.isascii() for lit in literals):
        raise ValueError("automaton: literals must be non-empty ASCII strings")
    children: list[dict[int, int]] = [{}]
    own: list[list[int]] = [[]]
    for k, lit in enumerate(literals):
        s = 0
        for b in lit.encode("ascii"):
            nxt = children[s].get(b)
            if nxt is None:
                nxt = len(children)
                children[s][b] = nxt
                children.append({})
                own.append([])
            s = nxt
        own[s].append(k)
    n = len(children)
    goto = np.zeros((n, 256), dtype=np.int32)
    fail = np.zeros(n, dtype=np.int64)
    outs: list[list[int]] = [[] for _ in range(n)]
    order = [0]
    for s in order:  # BFS: a state's failure state comes earlier in the order, so its row is complete
        if s:
            goto[s] = goto[fail[s]]
        outs[s] = own[s] + outs[fail[s]] if s else own[s]
        for b, c in children[s].items():
            fail[c] = goto[fail[s], b] if s else 0
            goto[s, b] = c
            order.append(c)
    off = np.zeros(n + 1, dtype=np.int64)
    off[1:] = np.cumsum([len(o) for o in outs])
    ids = np.array([k for o in outs for k in o], dtype=np.int32)
    return goto, off, ids


@compiled
def _scan(data, offs, goto, out_off, out_ids, seen, res_row, res_lit):
    """Distinct (row, literal) pairs into res_row / res_lit in row order; their count, or -1 when the result
    arrays are too small (the caller retries with larger ones). `seen` (one stamp per literal) starts at 0."""
    k = 0
    for r in range(len(offs) - 1):
        s = 0
        stamp = r + 1
        for i in range(offs[r], offs[r + 1]):
            s = goto[s, data[i]]
            lo = out_off[s]
            hi = out_off[s + 1]
            for q in range(lo, hi):
                lit = out_ids[q]
                if seen[lit] != stamp:
                    seen[lit] = stamp
                    if k >= len(res_row):
                        return -1
                    res_row[k] = r
                    res_lit[k] = lit
                    k += 1
    return k


def find_literals(texts, literals: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(row, literal index) of every distinct literal of `literals` that occurs in each text of `texts` (a list,
    Arrow or polars string column; nulls hold nothing), sorted by row. A text Arrow cannot hold (a lone surrogate)
    is searched as Python text."""
    data, offs, bad = utf8_buffers(texts)
    goto, off, ids = automaton(tuple(literals))
    cap = max(1024, 4 * len(offs))
    while True:
        seen = np.zeros(max(len(literals), 1), dtype=np.int64)
        rows, lits = np.empty(cap, dtype=np.int64), np.empty(cap, dtype=np.int32)
        k = _scan(data, offs, goto, off, ids, seen, rows, lits)
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
