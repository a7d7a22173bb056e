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
        if (name.startswith("__") and name.endswith("__")) or name in Remote.__slots__:
            raise AttributeError(name)  # (a slot not set yet: a test subclass's object before its __init__)
        return self._ch.attr(self._id, name)

    def __setattr__(self, name: str, value) -> None:
        if _test_subclass(type(self)):  # the test's own attributes of its subclass's objects stay here
            object.__setattr__(self, name, value)
            return
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


def _test_subclass(cls: type) -> bool:
    """A class the test derived from a stand-in (not a stand-in itself)."""
    return isinstance(cls, ProgramType) and "_cf_name" not in cls.__dict__


class ProgramType(type):
    """Metaclass of `program_class` stand-ins: calling one constructs in the program's process, class
    attributes (constants, static/class methods, Enum members) are read there. A class the test derives from
    a stand-in is built as Python builds classes: its `__init__` (or the stand-in's) constructs the program
    object its instance stands for (`_construct`)."""

    def __call__(cls, *args, **kwargs):
        if _test_subclass(cls):
            return type.__call__(cls, *args, **kwargs)
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


class _Method:
    """A public method of a program class on its stand-in: on an object, a call of the program object's
    method (one exchange; `super().push(x)` from a test subclass reaches it); on the class, the program
    class's attribute (a static or class method)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, obj, cls=None):
        if obj is None:
            return ProgramType.__getattr__(cls, self.name)
        return Call(obj._ch, obj._id, self.name)


def _construct(name: str):
    """The stand-in's `__init__` (run for objects of a test subclass only: a stand-in's own objects are the
    program's answers): construct the program object of class `name` and make this object stand for it."""

    def __init__(self, *args, **kwargs) -> None:  # noqa: N807
        if hasattr(self, "_id"):
            return
        ch = type(self)._cf_channel
        made = ch.call(None, name, args, kwargs)
        if not isinstance(made, Remote):
            raise TypeError(f"the program's {name}() did not make an object")
        i = object.__getattribute__(made, "_id")
        for k, v in (("_ch", ch), ("_id", i), ("_type", object.__getattribute__(made, "_type"))):
            object.__setattr__(self, k, v)
        ch.remotes[i] = self  # from now on the program's object comes back as this one

    return __init__


def program_class(ch, name: str, mro: list[str], known: dict[str, type], methods: list[str] = ()) -> type:
    """The stand-in class for the program class bound to `name` (its class names along the MRO: `mro`;
    bases: the stand-ins of its program bases already in `known`, else Remote; `methods`: its public method
    names, never a dunder or a name Remote uses); registered in `known` under its class name (references
    arrive with that name)."""
    bases = tuple(known[b] for b in mro[1:] if b in known and not issubclass(known[b], BaseException))
    body = {"__slots__": (), "_cf_channel": ch, "_cf_name": name, "__module__": "solution",
            "__init__": _construct(name)}
    for m in methods[:200]:
        if m.isidentifier() and not m.startswith("_") and not hasattr(Remote, m) and not hasattr(ProgramType, m):
            body[m] = _Method(m)
    cls = ProgramType(mro[0] or name, bases or (Remote,), body)
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
