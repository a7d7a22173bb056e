"""The typed plain-data encoding between the program's process and the test process (pure data: these run in
the test runner, no program code involved), the setup plans, and the sandbox's host-side bookkeeping."""

from __future__ import annotations

import collections
import fractions
import json
import math
import subprocess
import sys

import pytest

from cotforge.curate.verify.sandbox.jailed import codec, wire


def _roundtrip(value, **dec):
    sent = json.loads(wire.dumps({"v": codec.Encoder(handle=lambda x: 7).enc(value)}))["v"]
    return codec.Decoder(handle=lambda i, n, _iterator=False: ("handle", i, n), **dec).dec(sent)


@pytest.mark.parametrize("value", [
    None, True, 0, -3, 2 ** 80, -(2 ** 70), 1.5, -0.0, math.inf, "é\udcff", b"\x00ab", bytearray(b"xy"),
    [1, (2, 3)], (1,), {1, 2}, frozenset({3}), {"a": [1], (1, 2): None}, complex(1, -2), range(1, 9, 2),
    collections.Counter("aab"), collections.OrderedDict([(2, 1), (1, 2)]), collections.deque([1, 2], maxlen=3),
    fractions.Fraction(3, 7), [[[]]],
])
def test_values_keep_their_type_and_value(value):
    got = _roundtrip(value)
    assert type(got) is type(value) and got == value
    if isinstance(value, float):
        assert math.copysign(1, got) == math.copysign(1, value)


def test_nan_generators_views_and_numpy():
    assert math.isnan(_roundtrip(math.nan))
    assert list(_roundtrip(x * 2 for x in range(3))) == [0, 2, 4]
    assert _roundtrip({1: 2}.keys()) == {1} and list(_roundtrip({1: 2}.values())) == [2]
    np = pytest.importorskip("numpy")
    arr = _roundtrip(np.arange(6, dtype=np.int32).reshape(2, 3))
    assert arr.dtype == np.int32 and arr.shape == (2, 3) and arr.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert _roundtrip(np.float64(0.5)) == 0.5


def test_lists_and_trees_are_rebuilt_with_the_receivers_classes():
    a, b, c = codec.ListNode(1), codec.ListNode(2), codec.ListNode(3)
    a.next, b.next, c.next = b, c, b  # a cycle back to b

    class MyList:
        def __init__(self, val=0, next=None):
            self.val, self.next = val, next

    got = _roundtrip(a, listnode=MyList)
    assert type(got) is MyList and [got.val, got.next.val, got.next.next.val] == [1, 2, 3]
    assert got.next.next.next is got.next
    t = codec.TreeNode(4, codec.TreeNode(2), codec.TreeNode(7, None, codec.TreeNode(9)))
    back = _roundtrip(t)
    assert codec.Encoder().enc(back) == ["TN", [4, 2, 7, None, None, None, 9]]


def test_unknown_objects_are_references_and_exceptions_become_builtins():
    class Weird:
        def __eq__(self, other):
            return True

    assert _roundtrip(Weird()) == ("handle", 7, "Weird")
    err = codec.Decoder().dec(codec.exception_value(type("MyErr", (KeyError,), {})("k")))
    assert type(err) is KeyError
    assert isinstance(codec.Decoder().dec(codec.exception_value(SystemExit(0))), codec.CandidateError)


@pytest.mark.parametrize("wire", [
    {"x": 1}, ["nope", 1], ["L", {"a": 1}], ["i", "zz"], ["B", "***"], ["D", [1]], ["S", ["L"]],
    ["H", 1, "x"], ["O", "C", []], ["NA", "O", [1], None], [1, 2], ["D", [["L"], 1]],
])
def test_malformed_or_refused_messages_are_errors(wire):
    with pytest.raises((codec.CodecError, TypeError, ValueError)):
        codec.Decoder().dec(wire)


def test_message_limits():
    deep: list = ["L"]
    for _ in range(codec.MAX_DEPTH + 10):
        deep = ["L", deep]
    with pytest.raises(codec.CodecError):
        codec.Decoder().dec(deep)
    with pytest.raises(codec.CodecError):
        wire.loads(b"[1, 2]")
    import io

    stream = io.BytesIO(wire.frame({"op": "x", "args": [["L", 1]]}))
    assert wire.unframe(stream.read) == {"op": "x", "args": [["L", 1]]} and wire.unframe(stream.read) is None


def test_in_place_updates_reach_the_callers_objects():
    nums, grid, d, s = [1, 2, 3], [[1, 2], [3, 4]], {"a": 1}, {1}
    row = grid[0]
    codec.assign_into(nums, [3, 1, 2])
    codec.assign_into(grid, [[2, 1], [4, 3]])
    codec.assign_into(d, {"b": 2})
    codec.assign_into(s, {5})
    assert nums == [3, 1, 2] and grid == [[2, 1], [4, 3]] and row == [2, 1] and d == {"b": 2} and s == {5}
    head = codec.ListNode(1, codec.ListNode(2))
    codec.assign_into(head, codec.ListNode(9, codec.ListNode(8, codec.ListNode(7))))
    assert [head.val, head.next.val, head.next.next.val] == [9, 8, 7]


def test_setup_plan_of_the_leetcode_prelude():
    from cotforge.curate.verify.leetcode import LEETCODE_PRELUDE
    from cotforge.curate.verify.sandbox.setups import plan

    p = plan(LEETCODE_PRELUDE)
    assert p["bind"]["List"] == ["typing", "List"] and p["bind"]["pow"] == ["builtins", "pow"]
    assert p["bind"]["deque"] == ["collections", "deque"] and p["bind"]["math"] == ["math", None]
    assert p["eager_names"] == [] and "class ListNode" in p["eager"]
    assert plan("import numpy\nx = 1\n") is None and plan("x = 1\nimport math\n") is None


def test_run_uids_are_unique_across_verifier_processes():
    from cotforge.curate.verify.sandbox.jail import UidLease

    mine = UidLease()
    try:
        other = subprocess.run([sys.executable, "-c", "from cotforge.curate.verify.sandbox.jail import UidLease; "
                                "print(UidLease().uid)"], capture_output=True, text=True, check=True)
        assert int(other.stdout) != mine.uid
    finally:
        mine.release()
