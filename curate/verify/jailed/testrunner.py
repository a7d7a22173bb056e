"""The test process: runs assert-style test code (MBPP asserts, HumanEval `check(candidate)`, LeetCode
`check(Solution().method)`) against proxies of the program, which lives in another sandbox.

A zygote (`serve`) preloads the modules tests use and forks one child per test run (`run_one`). The child:
compiles and runs the test's trusted `setup`, reports "started", reads the program's list of names, binds
proxies for the names the test needs, runs the test and reports the verdict on a pipe only the host reads.

Name resolution in the test namespace (who wins): the test's own definitions; then what the setup defines
itself (def/class/assignment: a program cannot redefine `is_same_list` or `ListNode`); then the program's
functions, classes and modules (only those of TRUSTED_MODULES: never a module the program names), except that a builtin or a name the setup imports (the
LeetCode prelude star-imports `operator`, `math`...) keeps its binding unless the test only calls it on
literals or passes it on as an argument (`overridable_names`): so a program cannot redefine `abs` or
`isclose` for the test, while MBPP task 126's function `sum` (`assert sum(10, 15) == 6`) and a program's
`add` under the prelude (`check(add)`) are still the program's, as they would be in Python.

Every value the test sees comes back through `codec.Decoder`: built-in values, the setup's own
ListNode/TreeNode, or an opaque reference whose methods run in the program's process.
"""

from __future__ import annotations

import ast
import builtins
import json
import os
import signal
import socket
import sys
import threading

from . import codec, guards, remote, wire  # noqa: TID251 - inside the sandbox this folder is the package `jailed`
from .remote import Call, Remote  # noqa: TID251

RUN_DIR = "/tmp/cf-run-{pid}"  # a pytest run's folder (`pytestrun`), removed when its process is reaped
PYTEST_PRELOAD = ("pytest", "_pytest.python", "_pytest.assertion.rewrite", "_pytest.capture", "_pytest.tmpdir",
                  "_pytest.monkeypatch", "_pytest.fixtures", "_pytest.main", "_pytest.runner", "_pytest.terminal")
PRELOAD = ("typing", "collections", "heapq", "bisect", "itertools", "functools", "math", "string", "operator",
           "re", "random", "datetime", "copy", "decimal", "fractions", "statistics", "cmath")
# The only modules a program's module name may bind in the test namespace (`import numpy as np` in the
# program, `np.array` in an MBPP test): a fixed list whose import has no side effect. The test process never
# imports a name the program chose (issue 30: `__name__ = "venv.__main__"` ran a tool and exited 0).
TRUSTED_MODULES = frozenset(PRELOAD) | frozenset({
    "numpy", "sortedcontainers", "sys", "os", "time", "array", "json", "enum", "dataclasses", "abc", "numbers",
    "textwrap", "unicodedata", "calendar", "hashlib", "struct", "types", "io", "collections.abc", "os.path"})


class ProgramGone(BaseException):
    """The program's process closed the channel (it exited, crashed or was stopped at a limit). A
    BaseException, and remembered by the channel: a test's `except Exception` / `pytest.raises(Exception)`
    around a call must not turn a program that exits instead of raising into a pass."""


class ProtocolError(BaseException):
    """The program's process sent something that is not a valid message (remembered like ProgramGone)."""


class Channel:
    """Request/response over the two pipes to the program's process."""

    def __init__(self, fd_in: int, fd_out: int, cap: int, listnode: type, treenode: type) -> None:
        self.fd_in, self.fd_out, self.cap = fd_in, fd_out, cap
        self.buf = bytearray()
        self.scanned = 0  # bytes of `buf` known to hold no newline (the reader stays linear in the message)
        self.calls = 0
        self.requests = 0  # every request the program answered: a pass needs at least one
        self.lock = threading.RLock()  # one exchange at a time (tests calling the program from threads)
        self.broken: BaseException | None = None  # the first ProgramGone / ProtocolError: decides the verdict
        self.results: list[str] = []  # per-test statuses (pytest files)
        self.forward = False  # write the program's captured output of each call to this process's stdio
        self.classes: dict[str, type] = {}  # stand-ins of the program's classes and exception classes, by name
        self.remotes: dict[int, Remote] = {}  # one reference per program object
        self.handles: dict[str, int] = {}  # module-level program objects (classes) by name -> handle
        self.ret_dec = lambda: codec.Decoder(listnode, treenode, self.remote, None, guards.program_array,
                                             self.classes)
        self.arg_dec = lambda: codec.Decoder(listnode, treenode, self.remote, lambda _n, attrs: attrs,
                                             guards.program_array, self.classes)

    def fail(self, exc: BaseException) -> BaseException:
        """Remember the first channel failure (whatever the test does with the exception) and return it."""
        if self.broken is None:
            self.broken = exc
        return exc

    def remote(self, i: int, type_name: str, iterator: bool = False) -> Remote:
        """The reference for program object `i` (the same one each time), an instance of the stand-in of
        its class when the program announced that class."""
        if i not in self.remotes:
            cls = remote.RemoteIterator if iterator else self.classes.get(type_name)
            if not (isinstance(cls, type) and issubclass(cls, Remote)):
                cls = Remote
            obj = object.__new__(cls)
            cls.__init__(obj, self, i, type_name)
            self.remotes[i] = obj
        return self.remotes[i]

    def encoder(self) -> codec.Encoder:
        return codec.Encoder(self.ref, objects=True, refs=(Remote, Call, remote.ProgramType))

    def handle_of(self, name: str) -> int:
        """The reference id of the program's module-level object `name` (a class)."""
        if name not in self.handles:
            resp = self.exchange({"op": "handle", "target": None, "name": name})
            value = resp.get("value")
            if resp.get("op") != "ret" or type(value) is not list or len(value) < 2 or type(value[1]) is not int:
                raise self.fail(ProtocolError("unexpected answer to a handle request"))
            self.handles[name] = value[1]
        return self.handles[name]

    def dunder(self, target: int, name: str, args: tuple):
        """A builtin operation (len, str, iter, in, [] ...) on a program object, run there."""
        enc = self.encoder()
        resp = self.exchange({"op": "dunder", "target": target, "name": name, "args": [enc.enc(a) for a in args]})
        return self._result(resp)

    def next_items(self, target: int, n: int) -> tuple[list, bool]:
        """Up to `n` next items of a program iterator, and whether it ended."""
        resp = self.exchange({"op": "next", "target": target, "name": "", "n": n})
        items = self._result(resp)
        if type(items) is not list:
            raise self.fail(ProtocolError("malformed iterator items"))
        return items, resp.get("done") is True

    def data(self, target: int) -> dict:
        """A program object's attributes as values (equality of references is computed on these)."""
        state = self._result(self.exchange({"op": "data", "target": target, "name": ""}))
        if type(state) is not dict:
            raise self.fail(ProtocolError("malformed object data"))
        return state

    def _result(self, resp: dict):
        if resp.get("op") == "raise":
            exc = self.ret_dec().dec(resp.get("exc"))
            raise exc if isinstance(exc, Exception) else self.fail(ProtocolError("malformed exception"))
        if resp.get("op") != "ret":
            raise self.fail(ProtocolError("unexpected message"))
        try:
            return self.ret_dec().dec(resp.get("value"))
        except (codec.CodecError, TypeError, ValueError, KeyError, IndexError, RecursionError) as e:
            raise self.fail(ProtocolError(f"undecodable answer: {e!r}")) from None

    def ref(self, x) -> int:
        """The reference id of a program object the test passes back (a reference, or a program function or
        class by its module-level name)."""
        if isinstance(x, Remote):
            return object.__getattribute__(x, "_id")
        if isinstance(x, Call) and x._target is None:
            return self.handle_of(x._name)
        if isinstance(x, remote.ProgramType):
            return self.handle_of(x._cf_name)
        raise codec.CodecError(f"the test passes a value of type {type(x).__name__}, which cannot be sent")

    def recv(self) -> dict:
        """One message: read until its newline (each byte scanned once), refusing one over `cap` bytes."""
        while (end := self.buf.find(b"\n", self.scanned)) < 0:
            self.scanned = len(self.buf)
            if self.scanned > self.cap:
                raise self.fail(ProtocolError(f"message over {self.cap} bytes"))
            chunk = os.read(self.fd_in, 1 << 20)
            if not chunk:
                raise self.fail(ProgramGone("the program's process ended"))
            self.buf += chunk
        if end > self.cap:
            raise self.fail(ProtocolError(f"message over {self.cap} bytes"))
        line = bytes(self.buf[:end])
        del self.buf[:end + 1]
        self.scanned = 0
        try:
            msg = wire.loads(line)
        except codec.CodecError as e:
            raise self.fail(ProtocolError(str(e))) from None
        if not isinstance(msg, dict):
            raise self.fail(ProtocolError("a message is not a mapping"))
        return msg

    def exchange(self, msg: dict) -> dict:
        """Send one request and read its answer, as one step for every thread of the test."""
        with self.lock:
            self.send(msg)
            resp = self.recv()
            self.requests += 1
            return resp

    def send(self, msg: dict) -> None:
        data = memoryview(wire.frame(msg))
        try:
            while data:
                data = data[os.write(self.fd_out, data):]
        except BrokenPipeError:
            raise self.fail(ProgramGone("the program's process ended")) from None

    def call(self, target: int | None, name: str, args: tuple, kwargs: dict):
        self.calls += 1
        enc = self.encoder()
        resp = self.exchange({"op": "call", "target": target, "name": name, "args": [enc.enc(a) for a in args],
                              "kwargs": {str(k): enc.enc(v) for k, v in kwargs.items()}})
        if self.forward:
            _forward_output(resp)
        try:
            dec = self.arg_dec()
            for i, v in resp.get("args") or []:
                if type(i) is int and 0 <= i < len(args):
                    codec.assign_into(args[i], dec.dec(v))
            for k, v in resp.get("kwargs") or []:
                if k in kwargs:
                    codec.assign_into(kwargs[k], dec.dec(v))
            if resp.get("op") == "raise":
                exc = self.ret_dec().dec(resp.get("exc"))
                if not isinstance(exc, Exception):
                    raise self.fail(ProtocolError("malformed exception"))
            elif resp.get("op") == "ret":
                return self.ret_dec().dec(resp.get("value"))
            else:
                raise self.fail(ProtocolError("unexpected message"))
        except (codec.CodecError, TypeError, ValueError, KeyError, IndexError, RecursionError) as e:
            raise self.fail(ProtocolError(f"undecodable answer: {e!r}")) from None
        raise exc

    def set_attr(self, target: int, name: str, value) -> None:
        """`obj.name = value` on a program object (test setups that build the program's data structures)."""
        resp = self.exchange({"op": "setattr", "target": target, "name": name,
                              "value": self.encoder().enc(value)})
        if resp.get("op") == "raise":
            exc = self.ret_dec().dec(resp.get("exc"))
            raise exc if isinstance(exc, Exception) else self.fail(ProtocolError("malformed exception"))

    def attr(self, target: int, name: str):
        resp = self.exchange({"op": "getattr", "target": target, "name": name})
        if resp.get("op") != "ret":
            exc = self.ret_dec().dec(resp.get("exc")) if resp.get("op") == "raise" else None
            raise exc if isinstance(exc, Exception) else self.fail(ProtocolError("unexpected message"))
        if resp.get("callable") is True:
            return Call(self, target, name)
        try:
            return self.ret_dec().dec(resp.get("value"))
        except (codec.CodecError, TypeError, ValueError) as e:
            raise self.fail(ProtocolError(f"undecodable answer: {e!r}")) from None


def overridable_names(test_source: str) -> set[str]:
    """Names a program definition may stand behind even where a builtin or a name the setup imports exists
    (as in Python, where the program runs after the setup): those the test only calls on literal arguments
    (`sum(10, 15)`, MBPP task 126) or passes on as a bare argument (`check(add)`). Anywhere else (`abs(result -
    expected)`, `isclose(result, expected)`, `is_same_list(result, expected)`) such a function would see or
    decide the comparison, so the builtin / setup binding is kept."""
    tree = ast.parse(test_source)
    fine: set[int] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Call):
            if isinstance(n.func, ast.Name) and all(_literal(a) for a in n.args) and \
                    all(_literal(k.value) for k in n.keywords):
                fine.add(id(n.func))
            fine.update(id(a) for a in n.args if isinstance(a, ast.Name))
    ok: dict[str, bool] = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.Name):
            ok[n.id] = ok.get(n.id, True) and isinstance(n.ctx, ast.Load) and id(n) in fine
    return {k for k, v in ok.items() if v}


def defined_names(source: str) -> set[str]:
    """Names a module body binds itself (def, class, assignment), as opposed to importing them."""
    out: set[str] = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    return out


def _literal(node) -> bool:
    try:
        ast.literal_eval(node)
        return True
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False


def _bind_program_names(ns: dict, names: dict, protected: set[str], overridable, ch: Channel,
                        used=None) -> None:
    """Bind the program's functions, classes (stand-ins, `remote.py`), exception classes, modules (trusted
    ones only) and, when the test uses them (`used`), module-level values the test may use (see the module
    docstring). Classes with fewer bases first, so a subclass's stand-in derives from its base's."""
    items = [(n, k) for n, k in list(names.items())[:codec.MAX_ITEMS] if type(n) is str and type(k) is str]
    for name, kind in sorted(items, key=lambda nk: nk[1].count(",")):
        if name in protected or ((hasattr(builtins, name) or name in ns) and name not in overridable):
            continue
        if kind in ("function", "class"):
            ns[name] = Call(ch, None, name)
        elif kind.startswith("class:"):
            ns[name] = remote.program_class(ch, name, kind[len("class:"):].split(","), ch.classes)
        elif kind.startswith("exception:"):
            ns[name] = remote.program_exception(kind[len("exception:"):].split(","), ch.classes)
        elif kind == "value":
            if used is not None and name in used:
                ns[name] = ch.attr(None, name)
        elif kind.startswith("module:"):
            module = trusted_module(kind[len("module:"):])
            if module is not None:
                ns[name] = module


def trusted_module(modname: str):
    """The module `modname` when it is one of TRUSTED_MODULES (imported here if it is not yet), else None:
    a program chooses at most which of these side-effect-free modules a name stands for."""
    import importlib

    top = modname.split(".")[0]
    if modname not in TRUSTED_MODULES or not (top in sys.stdlib_module_names or top in ALLOWED_PACKAGES):
        return None
    try:
        return sys.modules.get(modname) or importlib.import_module(modname)
    except ImportError:
        return None


ALLOWED_PACKAGES: set[str] = set()


def _assert_detail(e: BaseException, test_source: str) -> str:
    tb, line = e.__traceback__, None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "test.py":
            line = tb.tb_lineno
        tb = tb.tb_next
    lines = test_source.splitlines()
    text = lines[line - 1].strip() if line and 0 < line <= len(lines) else ""
    return f"AssertionError at test line {line}: {text[:200]}" + (f" ({e})" if str(e) else "")


class _Lazy:
    """A set computed on first membership test (parsing the test only when a program name needs it)."""

    def __init__(self, make) -> None:
        self.make, self.value = make, None

    def __contains__(self, item) -> bool:
        if self.value is None:
            self.value = self.make()
        return item in self.value


WARM: dict[str, tuple[dict, set[str]]] = {}  # setups run once in the zygote; children start from a copy


def setup_namespace(setup: str) -> tuple[dict, set[str]]:
    """A fresh test namespace with `setup` run in it, and the names the setup defines itself."""
    if setup in WARM:
        ns, protected = WARM[setup]
        return dict(ns), protected
    ns: dict = {"__name__": "__main__", "__builtins__": builtins}
    if setup:
        exec(compile(setup, "setup.py", "exec", dont_inherit=True), ns)
    return ns, defined_names(setup) if setup else set()


def run_one(spec: dict, chan_in: int, chan_out: int, report_fd: int) -> None:
    """One test run (in a forked child of the zygote)."""
    import resource

    def report(**kw) -> None:
        data = (json.dumps(kw) + "\n").encode()
        while data:
            data = data[os.write(report_fd, data):]

    lim = spec["limits"]
    os.setsid()  # its own process group: whatever it starts dies with it (`_end_run`)
    folder = RUN_DIR.format(pid=os.getpid())
    os.makedirs(folder, exist_ok=True)
    os.chdir(folder)  # files the test writes land in the run's folder, removed when the run ends
    resource.setrlimit(resource.RLIMIT_CPU, (lim["cpu"], lim["cpu"]))
    grow = _address_space() + lim["memory"]  # the run's memory limit, over what the fork inherited
    resource.setrlimit(resource.RLIMIT_AS, (grow, grow))
    signal.alarm(lim["wall"])
    deferred = None
    try:
        test = compile(spec["test"], "test.py", "exec", dont_inherit=True)
        overridable = _Lazy(lambda: overridable_names(spec["test"]))
        try:
            ns, protected = setup_namespace(spec.get("setup") or "")
        except NameError:  # the setup uses the program's names (MBPP 367: `root = Node(1)`): after binding them
            deferred = compile(spec["setup"], "setup.py", "exec", dont_inherit=True)
            ns, protected = setup_namespace("")
            protected = defined_names(spec["setup"])
    except BaseException as e:  # noqa: BLE001 - the test's own fault: reported before anything of the program
        report(phase="setup", error=f"{type(e).__name__}: {e}"[:500])
        return
    ln, tn = ns.get("ListNode"), ns.get("TreeNode")
    ch = Channel(chan_in, chan_out, spec["channel_bytes"], ln if isinstance(ln, type) else codec.ListNode,
                 tn if isinstance(tn, type) else codec.TreeNode)
    report(phase="started")
    status, detail = _run_test(ch, ns, test, spec, protected, overridable, deferred)
    if status == "pass" and ch.requests == 0:  # the test ran without ever reaching the program: no evidence
        status, detail = "fail", "the test never called the program"
    report(status=status, detail=detail[:1000], calls=ch.calls, results=ch.results)


def _address_space() -> int:
    """This process's current virtual size in bytes (from /proc/self/statm)."""
    with open("/proc/self/statm", "rb") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def _run_test(ch: Channel, ns: dict, test, spec: dict, protected: set, overridable,
              deferred=None) -> tuple[str, str]:
    try:
        status, detail = _run_test_code(ch, ns, test, spec, protected, overridable, deferred)
    except MemoryError:  # decoding what the program sent, or the test's own work on it, over the limit
        status, detail = "memory", "MemoryError in the test process"
    except BaseException as e:  # noqa: BLE001 - whatever the test let through
        status, detail = _status_of(e, spec["test"])
    return broken_status(ch) or (status, detail)


def broken_status(ch: Channel) -> tuple[str, str] | None:
    """The verdict when the channel failed at any point of the test, caught by the test or not."""
    if isinstance(ch.broken, ProgramGone):
        return "program_exited", str(ch.broken)
    if isinstance(ch.broken, ProtocolError):
        return "runtime_error", f"protocol: {ch.broken}"
    return None


def _run_test_code(ch: Channel, ns: dict, test, spec: dict, protected: set, overridable,
                   deferred=None) -> tuple[str, str]:
    hello = ch.recv()
    if hello.get("op") != "hello" or type(hello.get("names")) is not dict:
        return "runtime_error", "protocol: the program's process did not start properly"
    if hello.get("error"):
        exc = codec.Decoder().dec(hello["error"])
        return "runtime_error", f"the program raised while loading: {type(exc).__name__}: {exc}"
    if spec.get("pytest_module"):
        from . import pytestrun  # noqa: TID251 - see above

        status, detail, ch.results = pytestrun.run_file(ch, hello["names"], spec)
        return status, detail
    _bind_program_names(ns, hello["names"], protected, overridable, ch,
                        _Lazy(lambda: {n.id for n in ast.walk(ast.parse(spec["test"])) if isinstance(n, ast.Name)}))
    if deferred is not None:
        exec(deferred, ns)
    exec(test, ns)
    if spec.get("entry_point"):
        ns["check"](Call(ch, None, spec["entry_point"]))
    return "pass", ""


def _status_of(e: BaseException, test_source: str) -> tuple[str, str]:
    if isinstance(e, AssertionError):
        return "fail", _assert_detail(e, test_source)
    if isinstance(e, ProgramGone):
        return "program_exited", str(e)
    if isinstance(e, ProtocolError):
        return "runtime_error", f"protocol: {e}"
    if isinstance(e, SystemExit):  # never a pass: the test did not run to its end
        return "runtime_error", f"the test ended with SystemExit({e.code!r}) before it finished"
    if isinstance(e, codec.CandidateError):
        return "runtime_error", f"the program raised {e}"
    return "runtime_error", f"{type(e).__name__}: {e}"


def _forward_output(resp: dict) -> None:
    """Write what the program printed during a call to this process's stdout/stderr (pytest's capsys reads
    it there); plain text only."""
    for key, stream in (("out", sys.stdout), ("err", sys.stderr)):
        text = resp.get(key)
        if type(text) is str and text:
            stream.write(text)


def serve(ctl_fd: int, allowed: list[str], warm: list[str]) -> None:
    """The zygote: preload modules and the common setups, then fork one `run_one` child per request on the
    control socket."""
    import importlib

    ALLOWED_PACKAGES.update(allowed)
    for m in PRELOAD + (PYTEST_PRELOAD if "pytest" in allowed else ()):
        try:
            importlib.import_module(m)
        except ImportError:
            pass
    for setup in warm:
        try:
            WARM[setup] = setup_namespace(setup)
        except Exception:  # noqa: BLE001 - reported per run instead
            pass
    ctl = socket.socket(fileno=ctl_fd)
    children: dict[str, int] = {}
    while True:
        _reap(children)
        try:
            msg, fds, _, _ = socket.recv_fds(ctl, 1 << 16, 8)
        except OSError:
            os._exit(0)
        if not msg:
            os._exit(0)
        req = json.loads(msg)
        if req.get("op") == "kill":  # the host's verdict is in: end the run, then acknowledge
            pid = children.pop(req["token"], None)
            if pid:
                _end_run(pid, wait=True)
            try:
                ctl.send(b"done")
            except OSError:
                os._exit(0)
            continue
        pid = os.fork()
        if pid == 0:
            try:
                ctl.close()
                with os.fdopen(fds[0], "rb") as f:
                    spec = json.loads(f.read())
                run_one(spec, fds[1], fds[2], fds[3])
            finally:
                os._exit(0)
        children[req["token"]] = pid
        for fd in fds:
            os.close(fd)


def _reap(children: dict[str, int]) -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        for token, p in list(children.items()):
            if p == pid:
                del children[token]
        _end_run(pid, wait=False)


def _end_run(pid: int, wait: bool) -> None:
    """Kill a test run's process group (the run and anything it started), reap it (`wait`), and remove its
    folder: nothing of the run is left running or on disk."""
    import shutil

    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if wait:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
    shutil.rmtree(RUN_DIR.format(pid=pid), ignore_errors=True)


def main() -> None:
    """Entry point inside the sandbox: argv[1] is the fd of the host's marshalled spec (uid to drop to,
    sys.path, control socket fd, allowed packages)."""
    import marshal

    from .program import _drop_privileges  # noqa: TID251 - see above

    with os.fdopen(int(sys.argv[1]), "rb") as f:
        spec = marshal.loads(f.read())
    if spec.get("drop_uid") is not None:
        _drop_privileges(spec["drop_uid"])
    sys.path[:] = spec["sys_path"]
    serve(spec["ctl_fd"], spec["allowed"], spec.get("warm", []))
