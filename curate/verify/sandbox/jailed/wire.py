"""Messages between the program's process and the test process: program -> test as JSON lines (the test side
parses them with `json`, never trusting their content), test -> program as length-prefixed `marshal` (the
test side is trusted, and the program's process then needs neither `json` nor `re`, which cost a fresh
interpreter several milliseconds to import)."""

from __future__ import annotations

import marshal

from .codec import MAX_DEPTH, CodecError  # noqa: TID251 - inside the sandbox this folder is the package `jailed`


def dumps(message: dict) -> bytes:
    """One program -> test message as a JSON line. Written without the `json` module (which imports `re`):
    the program's process should not pay for imports it does not need."""
    out: list[str] = []
    _emit(message, out.append, 0)
    out.append("\n")
    return "".join(out).encode("ascii")


try:
    from _json import encode_basestring_ascii as _quote
except ImportError:  # pragma: no cover - CPython always has _json
    def _quote(s: str) -> str:
        import json

        return json.dumps(s)


def _emit(x, w, depth: int) -> None:
    t = type(x)
    if depth > MAX_DEPTH + 5:
        raise CodecError("message too deep")
    if x is None:
        w("null")
    elif x is True:
        w("true")
    elif x is False:
        w("false")
    elif t is int:
        w(int.__repr__(x))
    elif t is float:
        w(float.__repr__(x) if x == x and x not in (float("inf"), float("-inf"))
          else "NaN" if x != x else ("Infinity" if x > 0 else "-Infinity"))
    elif t is str:
        w(_quote(x))
    elif t is list or t is tuple:
        w("[")
        for i, v in enumerate(x):
            if i:
                w(",")
            _emit(v, w, depth + 1)
        w("]")
    elif t is dict:
        w("{")
        for i, (k, v) in enumerate(x.items()):
            if i:
                w(",")
            w(_quote(str(k)))
            w(":")
            _emit(v, w, depth + 1)
        w("}")
    else:
        raise CodecError(f"not a message value: {t.__name__}")


def loads(line: bytes) -> dict:
    """Parse one program -> test message (test side); CodecError on anything that is not a JSON object."""
    import json

    try:
        msg = json.loads(line)
    except (ValueError, RecursionError) as e:
        raise CodecError(f"malformed message ({type(e).__name__})") from None
    if type(msg) is not dict:
        raise CodecError("a message must be a JSON object")
    return msg


def frame(message: dict) -> bytes:
    """One test -> program message (trusted direction): length-prefixed `marshal` of the structure."""
    data = marshal.dumps(message)
    return len(data).to_bytes(4, "big") + data


def unframe(read_exact) -> dict | None:
    """Read one `frame` with `read_exact(n) -> bytes` (b"" at EOF); None at EOF."""
    head = read_exact(4)
    if len(head) < 4:
        return None
    return marshal.loads(read_exact(int.from_bytes(head, "big")))


