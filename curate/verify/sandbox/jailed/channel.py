"""The test process's side of the channel to the program's process: request/response over two pipes, the
references it decodes (`remote.py`), and the failures that decide a verdict whatever the test does with them
(`ProgramGone`, `ProtocolError`)."""

from __future__ import annotations

import os
import sys
import threading

from . import codec, events, guards, remote, wire  # noqa: TID251 - inside the sandbox this folder is the package `jailed`
from .remote import Call, Remote  # noqa: TID251


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
        self.callbacks: list = []  # the test's functions passed to the program, by id
        self.handles: dict[str, int] = {}  # module-level program objects (classes) by name -> handle
        self.nodes = listnode, treenode

    def ret_dec(self, table: list | tuple = ()) -> codec.Decoder:
        """The decoder of the program's answers; `table`: the test's objects the request sent (["OR", n])."""
        dec = codec.Decoder(*self.nodes, self.remote, None, guards.program_array, self.classes)
        dec.table = list(table)
        return dec

    def arg_dec(self, table: list | tuple = ()) -> codec.Decoder:
        """The decoder of mutated arguments (program objects inside them arrive as their attribute dicts)."""
        dec = codec.Decoder(*self.nodes, self.remote, lambda _n, attrs: attrs, guards.program_array, self.classes)
        dec.table = list(table)
        return dec

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
            (remote.RemoteIterator if iterator else Remote).__init__(obj, self, i, type_name)
            self.remotes[i] = obj
        return self.remotes[i]

    def encoder(self) -> codec.Encoder:
        """The test's values for the program: its objects in an object table (one entry per object, so shared
        nodes and cycles survive), its functions as callbacks, references as themselves."""
        return codec.Encoder(self.ref, objects=True, refs=(Remote, Call, remote.ProgramType), callback=self.register,
                             graph=True)

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
        resp = self.exchange({"op": "dunder", "target": target, "name": name, "args": [enc.enc(a) for a in args]},
                             enc)
        return self._result(resp, enc.kept)

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

    def _result(self, resp: dict, table: list | tuple = ()):
        if resp.get("op") == "raise":
            exc = self.ret_dec().dec(resp.get("exc"))
            raise exc if isinstance(exc, Exception) else self.fail(ProtocolError("malformed exception"))
        if resp.get("op") != "ret":
            raise self.fail(ProtocolError("unexpected message"))
        try:
            return self.ret_dec(table).dec(resp.get("value"))
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

    def exchange(self, msg: dict, enc: codec.Encoder | None = None) -> dict:
        """Send one request and read its answer, as one step for every thread of the test; calls the program
        makes meanwhile of the test's own functions (callbacks) are run here and answered. The test's logger
        levels go with the request, the warnings and log records the program emitted come back with the answer
        and are emitted here again (`events.py`). `enc`: the encoder of the request's values, whose objects go
        as the request's object table and get the attributes the program left them with."""
        with self.lock:
            levels = events.test_levels()
            if levels:
                msg["levels"] = levels
            if enc is not None and enc.kept:
                msg["objs"] = enc.objects_table()
            self.send(msg)
            while True:
                resp = self.recv()
                if resp.get("op") != "callback":
                    break
                self.run_callback(resp)
            self.requests += 1
            if enc is not None and enc.kept and resp.get("objs") is not None:
                self._sync(enc.kept, resp["objs"])
            try:
                events.replay(resp.get("events"), self.classes)
            except events.Malformed as e:
                raise self.fail(ProtocolError(str(e))) from None
            return resp

    def _sync(self, objs: list, rows) -> None:
        """Give the test's objects the attributes the program left them with (None: a row it did not change),
        so a test sees the program's mutations of its nodes as it would in one process."""
        if type(rows) is not list or len(rows) != len(objs):
            raise self.fail(ProtocolError("malformed object table"))
        try:
            dec = self.ret_dec(objs)
            new = [None if row is None else dec.attributes(row) for row in rows]
        except (codec.CodecError, TypeError, ValueError, KeyError, IndexError, RecursionError) as e:
            raise self.fail(ProtocolError(f"undecodable object table: {e!r}")) from None
        for obj, attrs in zip(objs, new, strict=True):
            for k, v in (attrs or {}).items():
                if k.startswith("__"):  # never a dunder of the test's object (`__class__`, `__dict__`)
                    continue
                old = vars(obj).get(k, v)
                if old is not v and type(old) is type(v) and isinstance(old, codec.MUTABLE):
                    codec.assign_into(old, v)
                    continue
                try:
                    setattr(obj, k, v)
                except (AttributeError, TypeError):
                    pass

    def register(self, fn) -> int:
        """A test function the program may call back: its id."""
        self.callbacks.append(fn)
        return len(self.callbacks) - 1

    def run_callback(self, req: dict) -> None:
        """Run the test's function `req["id"]` on the program's arguments; send back its value or exception
        (a channel failure inside it stays a channel failure)."""
        i = req.get("id")
        if type(i) is not int or not 0 <= i < len(self.callbacks) or type(req.get("args")) is not list \
                or type(req.get("kwargs")) is not dict:
            raise self.fail(ProtocolError("malformed callback request"))
        try:
            dec = self.ret_dec()
            args = [dec.dec(a) for a in req["args"]]
            kwargs = {str(k): dec.dec(v) for k, v in req["kwargs"].items()}
        except (codec.CodecError, TypeError, ValueError, KeyError, IndexError, RecursionError) as e:
            raise self.fail(ProtocolError(f"undecodable callback arguments: {e!r}")) from None
        try:
            enc = self.encoder()
            reply = {"op": "cbret", "value": enc.enc(self.callbacks[i](*args, **kwargs))}
            if enc.kept:
                reply["objs"] = enc.objects_table()
        except (ProgramGone, ProtocolError):
            raise
        except Exception as e:  # noqa: BLE001 - the test function's exception goes to its caller
            reply = {"op": "cbraise", "exc": codec.exception_value(e)}
        self.send(reply)

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
                              "kwargs": {str(k): enc.enc(v) for k, v in kwargs.items()}}, enc)
        if self.forward:
            forward_output(resp)
        try:
            dec = self.arg_dec(enc.kept)
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
                return self.ret_dec(enc.kept).dec(resp.get("value"))
            else:
                raise self.fail(ProtocolError("unexpected message"))
        except (codec.CodecError, TypeError, ValueError, KeyError, IndexError, RecursionError) as e:
            raise self.fail(ProtocolError(f"undecodable answer: {e!r}")) from None
        raise exc

    def set_attr(self, target: int, name: str, value) -> None:
        """`obj.name = value` on a program object (test setups that build the program's data structures)."""
        enc = self.encoder()
        resp = self.exchange({"op": "setattr", "target": target, "name": name, "value": enc.enc(value)}, enc)
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


def forward_output(resp: dict) -> None:
    """Write what the program printed during a call to this process's stdout/stderr (pytest's capsys reads
    it there); plain text only."""
    for key, stream in (("out", sys.stdout), ("err", sys.stderr)):
        text = resp.get(key)
        if type(text) is str and text:
            stream.write(text)
