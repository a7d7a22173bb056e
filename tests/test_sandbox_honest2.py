"""Honest test forms of issue 30 (false negatives of the two-process split): each must pass with a right
program, and a wrong program must still fail the same test (so the pass is not vacuous).

Program classes for `isinstance` / `pytest.raises` / `except`, exceptions with their args and attributes,
dataclass `==`, `len` / `str` / `iter` on program objects, static methods and class constants, Enum
members, returned closures, program functions passed as arguments and test functions (lambdas,
decorated functions) passed to the program, lazy (infinite) generators, tests
calling the program from threads, module-level constants (`from solution import CONSTANT`), many threads
in the program, `multiprocessing` with spawn.
"""

from __future__ import annotations

from conftest import case_assert, case_pytest, check_form

from cotforge.curate.verify.sandbox import SandboxLimits

LIM = SandboxLimits(wall_s=4.0, cpu_s=2.0, memory_mb=256, nproc=48, fsize_mb=4, output_bytes=1 << 16)


# name: (right program, wrong program, tests)
FORMS: dict[str, tuple[str, str, dict]] = {
    "pytest_raises_program_error": (
        "class InsufficientFunds(Exception):\n    pass\n\n\ndef withdraw(b, x):\n    if x > b:\n"
        "        raise InsufficientFunds('no')\n    return b - x\n",
        "class InsufficientFunds(Exception):\n    pass\n\n\ndef withdraw(b, x):\n    if x > b:\n"
        "        raise ValueError('no')\n    return b - x\n",
        case_pytest("import pytest\nfrom solution import withdraw, InsufficientFunds\n\n\ndef test_w():\n"
                "    with pytest.raises(InsufficientFunds, match='no'):\n        withdraw(1, 5)\n"
                "    assert withdraw(5, 1) == 4\n")),
    "except_program_error_subclass_of_builtin": (
        "class BadInput(ValueError):\n    pass\n\n\ndef parse(s):\n    if not s.isdigit():\n        raise BadInput(s)\n"
        "    return int(s)\n",
        "class BadInput(ValueError):\n    pass\n\n\ndef parse(s):\n    return int(s) if s.isdigit() else -1\n",
        case_assert("try:\n    parse('x')\nexcept BadInput as e:\n    assert isinstance(e, ValueError)\nelse:\n"
                "    assert False\nassert parse('12') == 12\n")),
    "exception_args_and_attributes": (
        "class HttpError(Exception):\n    def __init__(self, code, msg):\n        super().__init__(code, msg)\n"
        "        self.code = code\n\n\ndef get(u):\n    raise HttpError(404, 'missing ' + u)\n",
        "class HttpError(Exception):\n    def __init__(self, code, msg):\n        super().__init__(code, msg)\n"
        "        self.code = code\n\n\ndef get(u):\n    raise HttpError(500, 'missing ' + u)\n",
        case_assert("try:\n    get('a')\nexcept HttpError as e:\n    assert e.code == 404\n"
                "    assert e.args == (404, 'missing a')\nelse:\n    assert False\n"
                "try:\n    get('b')\nexcept Exception as e:\n    assert e.args[0] == 404\n")),
    "dataclass_equality": (
        "from dataclasses import dataclass\n\n\n@dataclass\nclass Point:\n    x: int\n    y: int\n\n\n"
        "def mid(a, b):\n    return Point((a.x + b.x) // 2, (a.y + b.y) // 2)\n",
        "from dataclasses import dataclass\n\n\n@dataclass\nclass Point:\n    x: int\n    y: int\n\n\n"
        "def mid(a, b):\n    return Point(a.x, b.y)\n",
        case_assert("assert mid(Point(0, 0), Point(4, 6)) == Point(2, 3)\nassert mid(Point(0, 0), Point(4, 6)) != Point(2, 4)\n")),
    "len_str_iter_contains_getitem": (
        "class Bag:\n    def __init__(self, xs):\n        self.xs = list(xs)\n    def __len__(self):\n"
        "        return len(self.xs)\n    def __str__(self):\n        return 'Bag(%d)' % len(self.xs)\n"
        "    def __iter__(self):\n        return iter(self.xs)\n    def __contains__(self, x):\n"
        "        return x in self.xs\n    def __getitem__(self, i):\n        return self.xs[i]\n",
        "class Bag:\n    def __init__(self, xs):\n        self.xs = list(xs)[:1]\n    def __len__(self):\n"
        "        return len(self.xs)\n    def __str__(self):\n        return 'Bag(%d)' % len(self.xs)\n"
        "    def __iter__(self):\n        return iter(self.xs)\n    def __contains__(self, x):\n"
        "        return x in self.xs\n    def __getitem__(self, i):\n        return self.xs[i]\n",
        case_assert("b = Bag([3, 1, 2])\nassert len(b) == 3\nassert str(b) == 'Bag(3)'\nassert list(b) == [3, 1, 2]\n"
                "assert 2 in b and 5 not in b\nassert b[1] == 1\nassert sorted(b) == [1, 2, 3]\n")),
    "isinstance_and_subclass": (
        "class Animal:\n    def speak(self):\n        return '...'\n\n\nclass Dog(Animal):\n"
        "    def speak(self):\n        return 'woof'\n\n\ndef make(kind):\n    return Dog() if kind == 'dog' else Animal()\n",
        "class Animal:\n    def speak(self):\n        return '...'\n\n\nclass Dog(Animal):\n"
        "    def speak(self):\n        return 'woof'\n\n\ndef make(kind):\n    return Animal()\n",
        case_assert("d = make('dog')\nassert isinstance(d, Dog) and isinstance(d, Animal)\nassert d.speak() == 'woof'\n"
                "assert not isinstance(make('cat'), Dog)\nassert issubclass(Dog, Animal)\n")),
    "static_method_and_class_constant": (
        "class Geo:\n    SCALE = 10\n\n    @staticmethod\n    def area(w, h):\n        return w * h\n\n"
        "    @classmethod\n    def unit(cls):\n        return cls.SCALE\n",
        "class Geo:\n    SCALE = 1\n\n    @staticmethod\n    def area(w, h):\n        return w + h\n\n"
        "    @classmethod\n    def unit(cls):\n        return cls.SCALE\n",
        case_assert("assert Geo.SCALE == 10\nassert Geo.area(3, 4) == 12\nassert Geo.unit() == 10\n"
                "assert Geo().area(2, 2) == 4\n")),
    "enum_members": (
        "from enum import Enum\n\n\nclass Color(Enum):\n    RED = 1\n    GREEN = 2\n\n\n"
        "def warm(c):\n    return c == Color.RED\n\n\ndef first():\n    return Color.RED\n",
        "from enum import Enum\n\n\nclass Color(Enum):\n    RED = 1\n    GREEN = 2\n\n\n"
        "def warm(c):\n    return False\n\n\ndef first():\n    return Color.GREEN\n",
        case_assert("assert first() == Color.RED\nassert first() is Color.RED\nassert Color.RED.value == 1\n"
                "assert warm(Color.RED) is True and warm(Color.GREEN) is False\n"
                "assert [c.name for c in Color] == ['RED', 'GREEN']\n")),
    "closures_and_functions_as_arguments": (
        "def make_adder(n):\n    return lambda x: x + n\n\n\ndef double(x):\n    return 2 * x\n\n\n"
        "def apply_twice(f, x):\n    return f(f(x))\n",
        "def make_adder(n):\n    return lambda x: x\n\n\ndef double(x):\n    return 2 * x\n\n\n"
        "def apply_twice(f, x):\n    return f(x)\n",
        case_assert("add2 = make_adder(2)\nassert add2(3) == 5\nassert apply_twice(double, 3) == 12\n")),
    "test_functions_passed_to_the_program": (
        "def apply(f, x):\n    return f(x)\n\n\ndef sort_by(xs, key):\n    return sorted(xs, key=key)\n\n\n"
        "def twice(f):\n    def wrapper(*a):\n        return f(f(*a))\n    return wrapper\n\n\n"
        "def square(x):\n    return x * x\n",
        "def apply(f, x):\n    return x\n\n\ndef sort_by(xs, key):\n    return sorted(xs)\n\n\n"
        "def twice(f):\n    return f\n\n\ndef square(x):\n    return x * x\n",
        case_assert("assert apply(lambda v: v + 1, 3) == 4\nassert sort_by(['bb', 'a', 'ccc'], key=len) == ['a', 'bb', 'ccc']\n"
                "@twice\ndef inc(v):\n    return v + 1\n\n\nassert inc(1) == 3\n"
                "assert apply(lambda v: square(v) + 1, 3) == 10\n")),
    "infinite_generator_read_lazily": (
        "def naturals():\n    n = 0\n    while True:\n        yield n\n        n += 1\n",
        "def naturals():\n    n = 0\n    while True:\n        yield n\n        n += 2\n",
        case_assert("import itertools\ng = naturals()\nassert next(g) == 0\nassert next(g) == 1\n"
                "assert list(itertools.islice(naturals(), 5)) == [0, 1, 2, 3, 4]\n"
                "assert [x for x, _ in zip(g, range(3))] == [2, 3, 4]\n")),
    "test_threads_call_the_program": (
        "def square(x):\n    return x * x\n",
        "def square(x):\n    return x + x\n",
        case_assert("import threading\nout = {}\n"
                "def work(k):\n    for i in range(20):\n        out[(k, i)] = square(k * 100 + i)\n"
                "ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]\n"
                "[t.start() for t in ts]\n[t.join() for t in ts]\n"
                "assert len(out) == 80 and all(v == (k * 100 + i) ** 2 for (k, i), v in out.items())\n")),
    "module_constant_assert": (
        "MOD = 10**9 + 7\nNAMES = ('a', 'b')\n\n\ndef f(x):\n    return x % MOD\n",
        "MOD = 10**9 + 9\nNAMES = ('a', 'b')\n\n\ndef f(x):\n    return x % MOD\n",
        case_assert("assert MOD == 10**9 + 7\nassert NAMES == ('a', 'b')\nassert f(MOD + 1) == 1\n")),
    "module_constant_pytest_import": (
        "MAX_SIZE = 3\n\n\ndef clip(xs):\n    return xs[:MAX_SIZE]\n",
        "MAX_SIZE = 4\n\n\ndef clip(xs):\n    return xs[:MAX_SIZE]\n",
        case_pytest("from solution import MAX_SIZE, clip\n\n\ndef test_clip():\n    assert MAX_SIZE == 3\n"
                "    assert clip([1, 2, 3, 4]) == [1, 2, 3]\n")),
    "many_threads_in_the_program": (
        "import threading\n\n\ndef count(n):\n    out = []\n    lock = threading.Lock()\n"
        "    everyone = threading.Barrier(n)\n"
        "    def w(i):\n        everyone.wait(timeout=10)\n        with lock:\n            out.append(i)\n"
        "    ts = [threading.Thread(target=w, args=(i,)) for i in range(n)]\n"
        "    [t.start() for t in ts]\n    [t.join() for t in ts]\n    return len(out)\n",
        "def count(n):\n    return n - 1\n",
        case_assert("assert count(30) == 30\n")),
}


def test_honest_form_passes_and_wrong_program_fails(form_verdicts, form):
    check_form(form_verdicts, form)


def test_multiprocessing_spawn_in_a_script():
    """`multiprocessing` with the spawn start method re-imports the main module from its `__file__`."""
    from cotforge.curate.verify.sandbox import run_python

    prog = ("import multiprocessing as mp\n\n\ndef sq(x):\n    return x * x\n\n\n"
            "if __name__ == '__main__':\n    ctx = mp.get_context('spawn')\n    with ctx.Pool(2) as p:\n"
            "        print(sum(p.map(sq, range(5))))\n")
    r = run_python(prog, limits=SandboxLimits(wall_s=20.0, cpu_s=10.0, memory_mb=512, nproc=32))
    assert r.status == "pass" and r.stdout.strip() == "30", (r.status, r.stdout, r.stderr[-800:])
