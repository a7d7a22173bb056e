"""The program's harness: the first (and only trusted) code of a run's process inside the sandbox.

Started by the host as `python -S -s -B -P -c "...; main()" SPEC_FD` with the spec (a `marshal`led dict
from the trusted host) on SPEC_FD and a status pipe. Steps:

1. drop to the run's uid (root hosts), set the resource limits, run the test's `setup` (trusted),
2. write "U" on the status pipe: from here on everything that happens is the program's doing,
3. compile the program (`from __future__ import annotations` semantics, so HumanEval-style hints such as
   `List[int]` need no import); a syntax error is reported as "S <detail>", then the status pipe is closed,
4. script mode: run it as `__main__` like `python solution.py` (normal interpreter exit: non-daemon threads
   are joined, atexit handlers run, output is flushed; `exit()`/`quit()` exist even without `site`);
   assert mode: run it as module `solution`, send the test process the names it defines, then serve calls
   (arguments in, return value / exception / mutated arguments out) in the typed encoding of `codec`.

The test code and its expected values never enter this process: it only ever computes values.
"""

from __future__ import annotations

import builtins
import marshal
import os
import sys

FUTURE_ANNOTATIONS = 0x1000000  # __future__.annotations.compiler_flag (CO_FUTURE_ANNOTATIONS)
ONLY_AST = 0x400  # ast.PyCF_ONLY_AST, without importing `ast`
DYNAMIC = frozenset({"eval", "exec", "globals", "locals", "vars", "__import__", "__builtins__"})
MAX_NAMES = 5000


class _Quitter:
    """`exit`/`quit` as `site` defines them (the sandbox runs without `site`)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Use {self.name}() or Ctrl-D (i.e. EOF) to exit"

    def __call__(self, code=None):
        raise SystemExit(code)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _fail_setup(status_fd: int, why: str) -> None:
    """Harness failure before user code: the host classifies it as sandbox_error."""
    try:
        _write_all(status_fd, b"E " + why.replace("\n", " ")[:500].encode("utf-8", "replace") + b"\n")
    finally:
        os._exit(70)


def drop_privileges(uid: int) -> None:
    """Leave the namespace's root for the run's uid; no capability may remain."""
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    if os.getresuid() != (uid, uid, uid):
        raise OSError("uid did not change")
    with open("/proc/self/status", "rb") as f:
        caps = [ln for ln in f.read().splitlines() if ln.startswith((b"CapEff:", b"CapPrm:"))]
    if any(int(ln.split()[1], 16) for ln in caps):
        raise OSError("capabilities remain after dropping privileges")


def _close_other_fds(keep: set[int]) -> None:
    """Close what bwrap's set-up left open (e.g. its block pipe): the program gets stdio and its channel only."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def _set_limits(lim: dict) -> None:
    """Set the per-process limits; CPU time's soft limit one second under the hard one, so a process over it
    gets SIGXCPU (a timeout to the host) before the hard limit's SIGKILL (which reads as any kill)."""
    import resource

    for name, value in lim.items():
        res = getattr(resource, name)
        resource.setrlimit(res, (max(1, value - 1) if name == "RLIMIT_CPU" else value, value))


def main() -> None:
    """Entry point inside the sandbox (see the module docstring)."""
    with os.fdopen(int(sys.argv[1]), "rb") as f:
        spec = marshal.loads(f.read())
    status_fd = spec["status_fd"]
    try:
        sys.path[:] = spec["sys_path"]
        if spec.get("drop_uid") is not None:
            drop_privileges(spec["drop_uid"])
        _set_limits(spec["rlimits"])
        if spec.get("share"):  # files it makes in the shared folder stay writable by the test process's uid
            os.umask(0)
        builtins.exit, builtins.quit = _Quitter("exit"), _Quitter("quit")
        mode = spec["mode"]
        mod = type(sys)("__main__" if mode == "script" else "solution")
        mod.__file__ = "/tmp/solution.py"
        mod.__builtins__ = builtins
        sys.modules[mod.__name__] = mod
        sys.argv = ["solution.py"]
        plan = spec.get("setup_plan") if spec.get("setup") else None
        if spec.get("setup") and plan is None:
            _run_setup(spec["setup"], mod.__dict__)
        with open(mod.__file__, "w", encoding="utf-8", errors="surrogateescape") as f:  # its __file__ exists
            f.write(spec["program"])
        if mode == "assert":
            _spawn_loader(spec.get("setup") or "")
    except BaseException as e:  # noqa: BLE001 - any failure here is the harness's, not the program's
        _fail_setup(status_fd, f"setup: {e!r}")
    _close_other_fds({0, 1, 2, status_fd, *(spec["chan"] or [])})
    _write_all(status_fd, b"U\n")
    try:
        tree = compile(spec["program"], "solution.py", "exec", flags=FUTURE_ANNOTATIONS | ONLY_AST,
                       dont_inherit=True)
        code = compile(tree, "solution.py", "exec", flags=FUTURE_ANNOTATIONS, dont_inherit=True)
    except MemoryError:
        _write_all(status_fd, b"M MemoryError while compiling\n")
        os._exit(1)
    except (SyntaxError, ValueError, OverflowError, RecursionError) as e:
        _write_all(status_fd, b"S " + repr(e)[:500].encode("utf-8", "replace") + b"\n")
        os._exit(1)
    os.close(status_fd)
    if plan is not None:
        _apply_plan(plan, spec["setup"], tree, mod.__dict__)
    if mode == "script":
        _run_script(code, mod, spec["program"])
    else:
        _serve(code, mod, spec["chan"], spec.get("forward_output", 0))


SPAWN_DIR = "/tmp/.cotforge-spawn"
SPAWN_LOADER = """# The program's module `solution` as a process started by multiprocessing (spawn, forkserver) imports it:
# the test's setup (trusted, as in the first process), then the program, compiled as the harness does.
import builtins
try:
    exec(compile(open({setup!r}).read(), "setup.py", "exec", dont_inherit=True), globals())
except NameError:
    pass
exec(compile(open({program!r}).read(), "solution.py", "exec", flags={flags}, dont_inherit=True), globals())
"""


def _spawn_loader(setup: str) -> None:
    """Assert mode: make the program importable as `solution` by processes multiprocessing starts with spawn
    or forkserver (they unpickle `solution.f` by importing the module; such a process gets this process's
    sys.path). A script's spawned processes re-run it from its `__file__` instead."""
    os.makedirs(SPAWN_DIR, exist_ok=True)
    with open(f"{SPAWN_DIR}/setup.txt", "w", encoding="utf-8") as f:
        f.write(setup)
    with open(f"{SPAWN_DIR}/solution.py", "w", encoding="utf-8") as f:
        f.write(SPAWN_LOADER.format(setup=f"{SPAWN_DIR}/setup.txt", program="/tmp/solution.py",
                                    flags=FUTURE_ANNOTATIONS))
    sys.path.append(SPAWN_DIR)


def _used_names(tree) -> set[str] | None:
    """Names the program refers to outside annotations (never evaluated here); None when it may reach names
    dynamically. Walks the `_ast` nodes `compile` returned, so `ast` is not imported."""
    names: set[str] = set()
    stack = [tree]
    while stack:
        node = stack.pop()
        if type(node).__name__ == "Name":
            names.add(node.id)
        for f in node._fields:
            if f in ("annotation", "returns"):
                continue
            v = getattr(node, f, None)
            if isinstance(v, list):
                stack.extend(x for x in v if hasattr(x, "_fields"))
            elif hasattr(v, "_fields"):
                stack.append(v)
    return None if names & DYNAMIC else names


def _apply_plan(plan: dict, setup: str, tree, g: dict) -> None:
    """Run the setup as `setups.plan` describes: bind the imported names the program (or the setup's own
    definitions) use, then run the definitions; the whole setup when the program is dynamic."""
    names = _used_names(tree)
    if names is None:
        _run_setup(setup, g)
        return
    for name in sorted((names | set(plan["eager_names"])) & set(plan["bind"])):
        module, attr = plan["bind"][name]
        __import__(module)  # not importlib (~1.5 ms more per run); the program has not run yet
        m = sys.modules[module]
        g[name] = m if attr is None else getattr(m, attr)
    _run_setup(plan["eager"], g)


def _run_setup(source: str, g: dict) -> None:
    """Run a setup in the program's namespace. One that needs the program's own names (MBPP's
    test_setup_code building trees of the program's `Node` class) is test data only the test process
    needs: skipped here."""
    try:
        exec(compile(source, "setup.py", "exec", dont_inherit=True), g)
    except NameError:
        pass


def _run_script(code, mod, source: str) -> None:
    """Run like `python solution.py`: exceptions print a traceback and exit 1 after normal shutdown."""
    try:
        exec(code, mod.__dict__)
    except SystemExit:
        raise
    except BaseException as e:  # noqa: BLE001
        import linecache

        linecache.cache["solution.py"] = (len(source), None, source.splitlines(True), "solution.py")
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != "solution.py":
            tb = tb.tb_next
        sys.excepthook(type(e), e, tb)
        sys.exit(1)


def _serve(code, mod, chan: list[int], forward: int = 0) -> None:
    """Assert mode: run the module, announce its names, then answer calls until the test process hangs up.
    `forward` > 0 (pytest files, whose `capsys` reads what a call printed): what each call writes to
    sys.stdout / sys.stderr goes back with its answer, up to `forward` characters each, as plain text."""
    from . import codec, events, wire  # noqa: TID251 - inside the sandbox this folder is the package `jailed`

    chan_in, chan_out = chan
    g = mod.__dict__
    error = None
    try:
        exec(code, g)
    except SystemExit:
        pass  # `exit()` after the definitions: what was defined stays callable
    except BaseException as e:  # noqa: BLE001
        error = codec.exception_value(e)
    _write_all(chan_out, wire.dumps({"op": "hello", "names": _names(g), "error": error}))
    table: dict[int, object] = {}
    known: dict[int, int] = {}  # id(obj) -> handle: one object, one reference (identity holds on the test side)

    def store(obj) -> int:
        if id(obj) in known:
            return known[id(obj)]
        table[len(table) + 1] = obj
        known[id(obj)] = len(table)
        return len(table)

    def lookup(i: int, _name: str, _iterator: bool = False):
        if i not in table:
            raise codec.CodecError(f"unknown handle {i}")
        return table[i]

    def build(cls_name: str):
        """An empty object for a test object of class `cls_name`: of the program's class of that name, else
        of the fallback node classes, else an attribute holder."""
        cls = g.get(cls_name)
        if not isinstance(cls, type):
            cls = {"ListNode": codec.ListNode, "TreeNode": codec.TreeNode}.get(cls_name)
        return cls.__new__(cls) if cls is not None else codec.holder(cls_name)

    reader = os.fdopen(chan_in, "rb", buffering=1 << 16)

    def decoder():
        ln, tn = (g.get(n) for n in ("ListNode", "TreeNode"))
        return codec.Decoder(ln if isinstance(ln, type) else codec.ListNode,
                             tn if isinstance(tn, type) else codec.TreeNode, lookup, None,
                             callbacks=lambda i: _Callback(i, serve_one), make=build)

    def serve_one(req: dict | None = None) -> dict | None:
        """Read the next request (unless given) and answer it; a callback's answer is returned instead."""
        req = wire.unframe(reader.read) if req is None else req  # trusted direction: marshal is fine
        if req is None:
            sys.stdout.flush()
            os._exit(0)
        if req.get("op") in ("cbret", "cbraise"):
            return req
        resp = _captured(forward, events.captured, _answer, req.get("levels"), req, g, decoder(), store, codec)
        _write_all(chan_out, wire.dumps(resp))
        return None

    _Callback.send = staticmethod(lambda msg: _write_all(chan_out, wire.dumps(msg)))
    _Callback.codec, _Callback.store, _Callback.decoder = codec, staticmethod(store), staticmethod(decoder)
    while True:
        serve_one()


class _Callback:
    """A function of the test (a lambda, a decorated function) the program calls: the call goes to the test
    process, which runs it and answers; requests the test makes meanwhile are served here."""

    send = codec = store = decoder = None  # set by `_serve`

    def __init__(self, i: int, serve_one) -> None:
        self.i, self.serve_one = i, serve_one

    def __call__(self, *args, **kwargs):
        enc = self.codec.Encoder(self.store, lazy=True)
        self.send({"op": "callback", "id": self.i, "args": [enc.enc(a) for a in args],
                   "kwargs": {str(k): enc.enc(v) for k, v in kwargs.items()}})
        while True:
            answer = self.serve_one()
            if answer is None:
                continue
            dec = self.decoder()
            if answer.get("objs"):
                dec.load(answer["objs"])
            value = dec.dec(answer.get("value") if answer["op"] == "cbret" else answer.get("exc"))
            if answer["op"] == "cbraise":
                raise value
            return value


def _captured(limit: int, answer, *args) -> dict:
    """`answer(*args)`, with what it printed to sys.stdout / sys.stderr attached (limit > 0) instead of
    written."""
    if limit <= 0:
        return answer(*args)
    import io

    saved = sys.stdout, sys.stderr
    out, err = io.StringIO(), io.StringIO()
    sys.stdout, sys.stderr = out, err
    try:
        resp = answer(*args)
    finally:
        sys.stdout, sys.stderr = saved
    resp["out"], resp["err"] = out.getvalue()[:limit], err.getvalue()[:limit]
    return resp


DUNDERS = {"len": len, "bool": bool, "str": str, "repr": repr, "iter": iter, "hash": hash,
           "contains": lambda t, x: x in t, "getitem": lambda t, k: t[k], "setitem": lambda t, k, v: t.__setitem__(k, v),
           "delitem": lambda t, k: t.__delitem__(k)}


def _answer(req: dict, g: dict, dec, store, codec) -> dict:
    """One request -> one response (exceptions of the program become values)."""
    args, kwargs, objs, before = [], {}, [], []
    try:
        objs = dec.load(req["objs"]) if req.get("objs") else []
        before = [dict(vars(o)) for o in objs]
        target = dec.dec(["H", req["target"], ""]) if req.get("target") else None
        name = req["name"]
        special = _special(req, g, target, dec, store, codec)
        if special is not None:
            return special
        if target is None:
            if name not in g:
                raise NameError(f"name {name!r} is not defined")
            fn = g[name]
        elif req["op"] != "setattr":
            fn = getattr(target, name)
        if req["op"] == "setattr":
            if target is None:
                raise TypeError("setattr needs an object")
            setattr(target, name, dec.dec(req["value"]))
            return {"op": "ret", "value": None}
        if req["op"] == "getattr":
            if callable(fn):
                return {"op": "ret", "callable": True}
            return {"op": "ret", "value": codec.Encoder(store, lazy=True).enc(fn)}
        args = [dec.dec(a) for a in req["args"]]
        kwargs = {str(k): dec.dec(v) for k, v in req["kwargs"].items()}
        value = fn(*args, **kwargs)
        ids = {id(o): n for n, o in enumerate(objs)}  # the test's own objects go back as themselves
        resp = {"op": "ret", "value": codec.Encoder(store, lazy=True, table_ids=ids).enc(value)}
    except BaseException as e:  # noqa: BLE001 - SystemExit too: a call cannot end the test
        resp = {"op": "raise", "exc": codec.exception_value(e, store)}
    try:
        ids = {id(o): n for n, o in enumerate(objs)}
        back = codec.Encoder(store, objects=True, table_ids=ids)
        resp["args"] = [[i, back.enc(a)] for i, a in enumerate(args) if codec.is_mutable(a) and id(a) not in ids]
        resp["kwargs"] = [[k, back.enc(v)] for k, v in kwargs.items() if codec.is_mutable(v) and id(v) not in ids]
        if objs:  # the test's objects after the call (the program may have changed their attributes)
            attrs = codec.Encoder(store, lazy=True, table_ids=ids)
            resp["objs"] = [None if _unchanged(o, b) else
                            [[k, attrs.enc(v)] for k, v in vars(o).items() if type(k) is str and not k.startswith("__")]
                            for o, b in zip(objs, before, strict=False)]
    except BaseException as e:  # noqa: BLE001
        resp = {"op": "raise", "exc": codec.exception_value(e, store)}
    return resp


def _unchanged(obj, before: dict) -> bool:
    """Whether a test object still has the same attributes, bound to the same immutable-looking values (a
    container may have changed in place: sent again)."""
    now = vars(obj)
    return now.keys() == before.keys() and all(
        now[k] is v and not isinstance(v, list | dict | set | bytearray) for k, v in before.items())


def _special(req: dict, g: dict, target, dec, store, codec) -> dict | None:
    """The requests other than call/getattr/setattr: a reference to a module-level object ("handle"), the
    next items of an iterator ("next", up to n), a builtin operation on an object ("dunder": len, str, iter,
    `in`, indexing...), an object's data ("data", for equality computed on the test side)."""
    op = req["op"]
    if op == "handle":
        if req["name"] not in g:
            raise NameError(f"name {req['name']!r} is not defined")
        return {"op": "ret", "value": ["H", store(g[req["name"]]), type(g[req["name"]]).__name__]}
    if op == "next":
        items, done = [], False
        for _ in range(max(1, min(int(req.get("n", 1)), 4096))):
            try:
                items.append(next(target))
            except StopIteration:
                done = True
                break
        return {"op": "ret", "value": codec.Encoder(store, lazy=True).enc(items), "done": done}
    if op == "dunder":
        fn = DUNDERS[req["name"]]
        args = [dec.dec(a) for a in req["args"]]
        return {"op": "ret", "value": codec.Encoder(store, lazy=True).enc(fn(target, *args))}
    if op == "data":
        state = vars(target) if hasattr(target, "__dict__") else {
            k: getattr(target, k) for k in getattr(type(target), "__slots__", ()) if hasattr(target, k)}
        return {"op": "ret", "value": codec.Encoder(store).enc(dict(state))}
    return None


def _methods(cls: type) -> str:
    """The public methods of a class (functions, static and class methods along its MRO), space-separated:
    the test side's stand-in class gets them as methods, so `super().push(x)` in a test subclass works."""
    kinds = (type(_methods), staticmethod, classmethod)
    try:
        names = {k for c in cls.__mro__[:20] if c is not object for k, v in list(vars(c).items())
                 if type(k) is str and k.isidentifier() and not k.startswith("_") and isinstance(v, kinds)}
    except Exception:  # noqa: BLE001 - a class whose namespace cannot be read: announced without methods
        return ""
    return " ".join(sorted(names)[:200])


def _names(g: dict) -> dict[str, str]:
    """What the module defines, for the test process's name lookups: "function", "class:<MRO names>;<methods>",
    "exception:<MRO names>", "module:<name>", "value" (a module-level constant, fetched when the test uses
    it). Only names: the test process decides what each may bind (`testrunner._bind_program_names`)."""
    out: dict[str, str] = {}
    for k, v in list(g.items()):
        if k.startswith("__") or len(out) >= MAX_NAMES:
            continue
        try:
            if isinstance(v, type(sys)):
                out[k] = "module:" + str(getattr(v, "__name__", ""))
            elif isinstance(v, type):
                mro = ",".join(str(c.__name__) for c in v.__mro__[:20] if c is not object)
                out[k] = ("exception:" + mro) if issubclass(v, BaseException) else f"class:{mro};{_methods(v)}"
            elif callable(v):
                out[k] = "function"
            else:
                out[k] = "value"
        except Exception:  # noqa: BLE001 - a hostile __class__ / __call__ lookup
            continue
    return out
