"""Self-contained HTML reports (one file, no network: inline CSS and a few lines of plain JavaScript).

A report is a page of sections plus *cards*: one card per reviewed pair (a training row beside the
benchmark item it matched, a removed row beside the row it duplicates), with the matched or differing
spans marked. Cards carry `data-*` attributes, and `select` filters above them hide the cards that do not
match (e.g. by benchmark and source), with a live count of what is shown; a URL fragment such as
`#benchmark=math500&source=x` presets them (a link to one slice of the report).
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:1.5em auto;max-width:1400px;
     padding:0 1em;color:#1b1b1b}
h1{font-size:1.5em;margin:.2em 0} h2{font-size:1.15em;margin:1.4em 0 .4em}
table.counts{border-collapse:collapse;margin:.5em 0} table.counts td,table.counts th{border:1px solid #ccc;
     padding:2px 8px;text-align:right} table.counts th{background:#f3f3f3} table.counts td:first-child,
     table.counts th:first-child{text-align:left}
.filters{position:sticky;top:0;background:#fff;padding:.5em 0;border-bottom:1px solid #ddd;z-index:1}
.filters label{margin-right:1.2em} #shown{color:#555}
.card{border:1px solid #ccc;border-radius:6px;margin:.8em 0;padding:.5em .8em}
.card .head{font-size:.9em;color:#333;margin-bottom:.4em;word-break:break-all}
.card .head b{color:#000}
.pair{display:grid;grid-template-columns:1fr 1fr;gap:.8em}
.side h3{font-size:.85em;margin:.1em 0;color:#555;font-weight:600}
.text{white-space:pre-wrap;font:12.5px/1.4 ui-monospace,SFMono-Regular,Menlo,monospace;background:#fafafa;
      border:1px solid #e3e3e3;padding:.4em;max-height:22em;overflow:auto;word-break:break-word}
mark{background:#ffe08a;padding:0} mark.diff{background:#ffb3b3} .note{color:#8a5300;font-size:.85em}
.hidden{display:none}
"""

JS = """
function applyFilters(){
  const sel=[...document.querySelectorAll('select[data-filter]')];
  let n=0;
  document.querySelectorAll('.card').forEach(c=>{
    const ok=sel.every(s=>s.value===''||c.dataset[s.dataset.filter]===s.value);
    c.classList.toggle('hidden',!ok); if(ok) n++;
  });
  document.getElementById('shown').textContent=n+' shown';
}
new URLSearchParams(location.hash.slice(1)).forEach((v,k)=>{
  const s=document.querySelector('select[data-filter="'+k+'"]'); if(s) s.value=v;
});
document.querySelectorAll('select[data-filter]').forEach(s=>s.addEventListener('change',applyFilters));
applyFilters();
"""


def marked(text: str, spans: Sequence[tuple[int, int]], css: str = "") -> str:
    """`text` escaped, with the character spans [start, end) wrapped in <mark> (overlaps merged)."""
    out, pos = [], 0
    cls = f' class="{css}"' if css else ""
    for start, end in sorted(_merge(spans)):
        start, end = max(start, pos), min(end, len(text))
        if end <= start:
            continue
        out += [escape(text[pos:start]), f"<mark{cls}>", escape(text[start:end]), "</mark>"]
        pos = end
    out.append(escape(text[pos:]))
    return "".join(out)


def _merge(spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for s, e in sorted(spans):
        if merged and s <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(e, merged[-1][1]))
        else:
            merged.append((s, e))
    return merged


def window(text: str, start: int | None, end: int | None, context: int = 800) -> tuple[str, int, bool, bool]:
    """The part of `text` around [start, end) (whole text when short): (excerpt, offset of the excerpt,
    cut at the front, cut at the back)."""
    if start is None or end is None or len(text) <= 2 * context + (end - start):
        return text, 0, False, False
    a, b = max(0, start - context), min(len(text), end + context)
    return text[a:b], a, a > 0, b < len(text)


def counts_table(rows: Sequence[str], cols: Sequence[str], cell: dict[tuple[str, str], int], corner: str) -> str:
    """An HTML table of counts: one row per `rows` entry, one column per `cols` entry, plus totals."""
    head = "".join(f"<th>{escape(c)}</th>" for c in cols)
    body = []
    for r in rows:
        vals = [cell.get((r, c), 0) for c in cols]
        body.append(f"<tr><td>{escape(r)}</td>" + "".join(f"<td>{v or ''}</td>" for v in vals)
                    + f"<td><b>{sum(vals)}</b></td></tr>")
    totals = [sum(cell.get((r, c), 0) for r in rows) for c in cols]
    body.append("<tr><th>total</th>" + "".join(f"<th>{v}</th>" for v in totals) + f"<th>{sum(totals)}</th></tr>")
    return (f'<table class="counts"><tr><th>{escape(corner)}</th>{head}<th>total</th></tr>'
            + "".join(body) + "</table>")


def filters(options: dict[str, Sequence[str]]) -> str:
    """`select` boxes filtering the cards by their `data-<key>` attribute (key: list of values)."""
    parts = []
    for key, values in options.items():
        opts = "".join(f'<option value="{escape(v)}">{escape(v)}</option>' for v in values)
        parts.append(f'<label>{escape(key)} <select data-filter="{escape(key)}" id="filter-{escape(key)}">'
                     f'<option value="">all</option>{opts}</select></label>')
    return '<div class="filters">' + "".join(parts) + ' <span id="shown"></span></div>'


def card(data: dict[str, str], head: str, left_title: str, left_html: str, right_title: str, right_html: str,
         note: str = "") -> str:
    """One reviewed pair: a header line, then the two texts side by side (already escaped/marked HTML)."""
    attrs = " ".join(f'data-{escape(k)}="{escape(v)}"' for k, v in data.items())
    extra = f'<div class="note">{escape(note)}</div>' if note else ""
    return (f'<div class="card" {attrs}><div class="head">{head}</div>{extra}<div class="pair">'
            f'<div class="side"><h3>{escape(left_title)}</h3><div class="text">{left_html}</div></div>'
            f'<div class="side"><h3>{escape(right_title)}</h3><div class="text">{right_html}</div></div>'
            "</div></div>")


def page(title: str, body: str) -> str:
    """The whole document: inline CSS and JS, no external resource."""
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
            f'<meta name="viewport" content="width=device-width,initial-scale=1"><style>{CSS}</style></head>'
            f"<body>{body}<script>{JS}</script></body></html>\n")
