"""The test process's stand-ins for what lives in the program's process (references, not copies).

- `Call`: a program function or bound method; calling it runs it there. (The other way, the test's own
  functions passed to the program are callbacks: `channel.Channel.run_callback`.)
- `Remote`: a program object. Attribute reads, `len`, `str`, `repr`, `iter`, `in`, indexing and calls run
  there (their RESULTS are values the test then compares itself). Equality is never the program's `__eq__`:
  two references are equal when they are the same object or objects of the same class whose data (their
  `__dict__` / slots, fetched as plain values) are equal, computed here; a reference never equals a plain
  value. One program object is one reference (the program's side keeps one handle per object), so `is`,
  Enum members and shared nodes keep their identity.
- `RemoteIterator`: a program iterator or generator, read lazily in growing chunks (an infinite generator
  is fine as long as the test stops).
- `program_class`: a class of the test side standing for a program class (`isinstance`, class attributes,
  static methods, constructing instances there); `program_exception`: a local exception class standing for
  a program's exception class, so `pytest.raises(ProgramError)` / `except ProgramError` match what the
  program raises (built from names only: none of the program's code runs here).
"""

from __future__ import annotations

import builtins


class Call:
    """A function, class or bound method of the program: calling it runs it in the program's process."""

    __slots__ = ("_ch", "_target", "_name")

    def __init__(self, ch, target: int | None, name: str) -> None:
        self._ch, self._target, self._name = ch, target, name

    def __call__(self, *args, **kwargs):
        return self._ch.call(self._target, self._name, args, kwargs)

    def __repr__(self) -> str:
        return f"<program callable {self._name}>"


class Remote:
    """An object that lives in the program's process (see the module docstring)."""

    __slots__ = ("_ch", "_id", "_type")

    def __init__(self, ch, i: int, type_name: str) -> None:
        object.__setattr__(self, "_ch", ch)
        object.__setattr__(self, "_id", i)
        object.__setattr__(self, "_type", type_name)

    def __getattr__(self, name: str):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return self._ch.attr(self._id, name)

    def __setattr__(self, name: str, value) -> None:
        self._ch.set_attr(self._id, name, value)

    def _op(self, name: str, *args):
        return self._ch.dunder(self._id, name, args)

    def __call__(self, *args, **kwargs):
        return self._ch.call(self._id, "__call__", args, kwargs)

    def __len__(self) -> int:
        return self._op("len")

    def __bool__(self) -> bool:
        return self._op("bool")

    def __str__(self) -> str:
        return self._op("str")

    def __repr__(self) -> str:
        return self._op("repr")

    def __iter__(self):
        return iter(self._op("iter"))

    def __contains__(self, item) -> bool:
        return self._op("contains", item)

    def __getitem__(self, key):
        return self._op("getitem", key)

    def __setitem__(self, key, value) -> None:
        self._op("setitem", key, value)

    def __delitem__(self, key) -> None:
        self._op("delitem", key)

    def __eq__(self, other) -> bool:
        if not isinstance(other, Remote):
            return NotImplemented
        if self._ch is other._ch and self._id == other._id:
            return True
        return self._type == other._type and self._ch.data(self._id) == other._ch.data(other._id)

    def __ne__(self, other) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = object.__hash__


class RemoteIterator(Remote):
    """A program iterator/generator, read in chunks of 1, 2, 4, ... 1024 items as the test asks."""

    __slots__ = ("_buf", "_done", "_chunk")

    def __init__(self, ch, i: int, type_name: str) -> None:
        super().__init__(ch, i, type_name)
        for k, v in (("_buf", []), ("_done", False), ("_chunk", 1)):
            object.__setattr__(self, k, v)

    def __iter__(self):
        return self

    def __next__(self):
        if not self._buf and not self._done:
            items, done = self._ch.next_items(self._id, self._chunk)
            object.__setattr__(self, "_buf", list(items)[::-1])
            object.__setattr__(self, "_done", bool(done))
            object.__setattr__(self, "_chunk", min(2 * self._chunk, 1024))
        if self._buf:
            return self._buf.pop()
        raise StopIteration

    def __bool__(self) -> bool:
        return True


class ProgramType(type):
    """Metaclass of `program_class` stand-ins: calling one constructs in the program's process, class
    attributes (constants, static/class methods, Enum members) are read there."""

    def __call__(cls, *args, **kwargs):
        return cls._cf_channel.call(None, cls._cf_name, args, kwargs)

    def __getattr__(cls, name: str):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        ch = cls._cf_channel
        return ch.attr(ch.handle_of(cls._cf_name), name)

    def __iter__(cls):  # `for member in Color` (Enum classes)
        ch = cls._cf_channel
        return iter(ch.dunder(ch.handle_of(cls._cf_name), "iter", ()))

    def __len__(cls) -> int:
        ch = cls._cf_channel
        return ch.dunder(ch.handle_of(cls._cf_name), "len", ())

    def __repr__(cls) -> str:
        return f"<program class {cls._cf_name}>"


def program_class(ch, name: str, mro: list[str], known: dict[str, type]) -> type:
    """The stand-in class for the program class bound to `name` (its class names along the MRO: `mro`;
    bases: the stand-ins of its program bases already in `known`, else Remote); registered in `known` under
    its class name (references arrive with that name)."""
    bases = tuple(known[b] for b in mro[1:] if b in known and not issubclass(known[b], BaseException))
    cls = ProgramType(mro[0] or name, bases or (Remote,), {"__slots__": (), "_cf_channel": ch, "_cf_name": name,
                                                           "__module__": "solution"})
    known[mro[0] or name] = cls
    return cls


def _message(self) -> str:
    return self.__dict__.get("_cf_message") or Exception.__str__(self)


def program_exception(mro: list[str], known: dict[str, type]) -> type:
    """A local exception class for the program exception class whose class names along the MRO are `mro`:
    subclass of the stand-ins of its
    program bases and of the first built-in Exception class along its MRO (so `except ValueError` still
    matches)."""
    bases = [known[b] for b in mro[1:] if b in known and issubclass(known[b], BaseException)]
    builtin = next((c for c in (getattr(builtins, b, None) for b in mro[1:])
                    if isinstance(c, type) and issubclass(c, Exception)), Exception)
    if not any(issubclass(b, builtin) for b in bases):
        bases.append(builtin)
    try:
        cls = type(mro[0], tuple(bases), {"__module__": "solution", "__str__": _message})
    except TypeError:  # an MRO the bases cannot form here: the built-in base alone
        cls = type(mro[0], (builtin,), {"__module__": "solution", "__str__": _message})
    known[mro[0]] = cls
    return cls
