"""Honest test forms of issue 30 left after round 2: each must pass with a right program, and a wrong
program must still fail the same test (so the pass is not vacuous).

Shared object graphs passed from the test to the program (a node reachable twice, a `random` pointer,
cycles) arrive as one object per node; a test class subclassing a program class; warnings and log records the program emits during a call reach the
test process (`pytest.warns`, `warnings.catch_warnings(record=True)`, `caplog`, `assertLogs`).
"""

from __future__ import annotations

import pytest
from conftest import case_assert, case_pytest, check_form

from cotforge.curate.verify.sandbox import SandboxLimits

LIM = SandboxLimits(wall_s=4.0, cpu_s=2.0, memory_mb=256, nproc=48, fsize_mb=4, output_bytes=1 << 16)


RANDOM_NODE = ("class Node:\n    def __init__(self, x, next=None, random=None):\n"
               "        self.val, self.next, self.random = x, next, random\n\n\n")
COPY_RANDOM = RANDOM_NODE + (
    "def copyRandomList(head):\n    m = {None: None}\n    p = head\n    while p:\n"
    "        m[p] = Node(p.val)\n        p = p.next\n    p = head\n    while p:\n"
    "        m[p].next, m[p].random = m[p.next], m[p.random]\n        p = p.next\n    return m[head]\n")
COPY_RANDOM_SHALLOW = RANDOM_NODE + (  # the copy's random pointers point into the original list
    "def copyRandomList(head):\n    m = {None: None}\n    p = head\n    while p:\n"
    "        m[p] = Node(p.val)\n        p = p.next\n    p = head\n    while p:\n"
    "        m[p].next, m[p].random = m[p.next], p.random\n        p = p.next\n    return m[head]\n")
RANDOM_TEST = RANDOM_NODE + (
    "a, b, c = Node(7), Node(13), Node(11)\na.next, b.next = b, c\na.random, b.random, c.random = c, a, c\n"
    "h = copyRandomList(a)\nassert h is not a\nout, p = [], h\nwhile p:\n"
    "    out.append((p.val, p.random.val if p.random else None))\n    p = p.next\n"
    "assert out == [(7, 11), (13, 7), (11, 11)]\nassert h.random is h.next.next and h.next.random is h\n"
    "assert a.random is c and c.random is c\n")

GRAPH_NODE = ("class Node:\n    def __init__(self, val=0, neighbors=None):\n"
              "        self.val = val\n        self.neighbors = neighbors if neighbors is not None else []\n\n\n")
CLONE_GRAPH = GRAPH_NODE + (
    "def cloneGraph(node):\n    seen = {}\n    def go(n):\n        if n in seen:\n            return seen[n]\n"
    "        c = seen[n] = Node(n.val)\n        c.neighbors = [go(m) for m in n.neighbors]\n        return c\n"
    "    return go(node) if node else None\n\n\n"
    "def countNodes(nodes):\n    return len({id(n) for n in nodes})\n")
CLONE_GRAPH_WRONG = GRAPH_NODE + (  # builds a new node for every edge: the clone is a tree, not the graph
    "def cloneGraph(node, depth=0):\n    c = Node(node.val)\n"
    "    if depth < 4:\n        c.neighbors = [cloneGraph(m, depth + 1) for m in node.neighbors]\n    return c\n\n\n"
    "def countNodes(nodes):\n    return len(nodes)\n")
GRAPH_TEST = GRAPH_NODE + (
    "ns = [Node(i + 1) for i in range(4)]\n"
    "for i, n in enumerate(ns):\n    n.neighbors = [ns[(i - 1) % 4], ns[(i + 1) % 4]]\n"
    "assert countNodes([ns[0], ns[1], ns[0], ns[2]]) == 3\n"
    "g = cloneGraph(ns[0])\nseen, todo = set(), [g]\nwhile todo:\n    n = todo.pop()\n"
    "    if n in seen:\n        continue\n    seen.add(n)\n    todo.extend(n.neighbors)\n"
    "assert len(seen) == 4\nassert sorted(n.val for n in seen) == [1, 2, 3, 4]\n"
    "assert g.neighbors[1].neighbors[0] is g\n")

LIST_NODE = ("class ListNode:\n    def __init__(self, val=0, next=None):\n        self.val = val\n"
             "        self.next = next\n\n\n")
INTERSECTION = LIST_NODE + (
    "def getIntersectionNode(a, b):\n    seen = set()\n    while a:\n        seen.add(a)\n        a = a.next\n"
    "    while b:\n        if b in seen:\n            return b\n        b = b.next\n    return None\n")
INTERSECTION_BY_VALUE = LIST_NODE + (  # equal values are not the same node
    "def getIntersectionNode(a, b):\n    seen = set()\n    while a:\n        seen.add(a.val)\n        a = a.next\n"
    "    while b:\n        if b.val in seen:\n            return b\n        b = b.next\n    return None\n")
INTERSECTION_TEST = LIST_NODE + (
    "def build(xs, tail=None):\n    head = tail\n    for x in reversed(xs):\n        head = ListNode(x, head)\n"
    "    return head\n\n\ntail = build([8, 4, 5])\na = build([4, 1], tail)\nb = build([5, 6, 1], tail)\n"
    "assert getIntersectionNode(a, b) is tail\nassert getIntersectionNode(build([2, 6]), build([1, 5])) is None\n")
REORDER = LIST_NODE + (
    "def reorderList(head):\n    nodes = []\n    while head:\n        nodes.append(head)\n        head = head.next\n"
    "    i, j = 0, len(nodes) - 1\n    while i < j:\n        nodes[i].next = nodes[j]\n        i += 1\n"
    "        if i == j:\n            break\n        nodes[j].next = nodes[i]\n        j -= 1\n"
    "    if nodes:\n        nodes[i].next = None\n\n\n"
    "def hasCycle(head):\n    slow = fast = head\n    while fast and fast.next:\n        slow, fast = slow.next, fast.next.next\n"
    "        if slow is fast:\n            return True\n    return False\n")
REORDER_WRONG = LIST_NODE + (  # builds a reordered copy and leaves the test's list as it was
    "def reorderList(head):\n    vals = []\n    while head:\n        vals.append(head.val)\n        head = head.next\n"
    "    out = [vals[k // 2] if k % 2 == 0 else vals[-1 - k // 2] for k in range(len(vals))]\n    return out\n\n\n"
    "def hasCycle(head):\n    return False\n")
REORDER_TEST = LIST_NODE + (
    "nodes = [ListNode(i) for i in range(1, 6)]\nfor x, y in zip(nodes, nodes[1:]):\n    x.next = y\n"
    "assert reorderList(nodes[0]) is None\nout, p = [], nodes[0]\nwhile p:\n    out.append(p)\n    p = p.next\n"
    "assert out == [nodes[0], nodes[4], nodes[1], nodes[3], nodes[2]]\n"
    "big = [ListNode(i) for i in range(20000)]\nfor x, y in zip(big, big[1:]):\n    x.next = y\n"
    "assert not hasCycle(big[0])\nbig[-1].next = big[123]\nassert hasCycle(big[0])\n")

STACK = ("class Stack:\n    LIMIT = 100\n\n    def __init__(self):\n        self.items = []\n\n"
         "    def push(self, x):\n        self.items.append(x)\n\n    def pop(self):\n        return self.items.pop()\n\n"
         "    def size(self):\n        return len(self.items)\n\n    @staticmethod\n    def make(*xs):\n"
         "        s = Stack()\n        for x in xs:\n            s.push(x)\n        return s\n")
STACK_WRONG = STACK.replace("return self.items.pop()", "return self.items.pop(0)")
SUBCLASS_TEST = (
    "class CountingStack(Stack):\n    def __init__(self):\n        self.pushes = 0\n        super().__init__()\n\n"
    "    def push(self, x):\n        self.pushes += 1\n        super().push(x)\n\n"
    "    def peek(self):\n        v = self.pop()\n        super().push(v)\n        return v\n\n\n"
    "s = CountingStack()\ns.push(1)\ns.push(2)\nassert s.peek() == 2 and s.size() == 2 and s.pushes == 2\n"
    "assert isinstance(s, Stack) and isinstance(s, CountingStack) and s.LIMIT == 100\n"
    "assert s.pop() == 2 and s.pop() == 1 and s.size() == 0\nassert Stack.make(4, 5).pop() == 5\n")

WARN_PROGRAM = (
    "import logging\nimport warnings\n\nlog = logging.getLogger('parser')\n\n\n"
    "class LegacyWarning(DeprecationWarning):\n    pass\n\n\n"
    "def parse(s):\n    warnings.warn('old api', LegacyWarning)\n    if not s.isdigit():\n"
    "        log.warning('bad input %r', s)\n        return None\n    log.info('parsed %s', s)\n    return int(s)\n")
SILENT_PROGRAM = (
    "class LegacyWarning(DeprecationWarning):\n    pass\n\n\n"
    "def parse(s):\n    return int(s) if s.isdigit() else None\n")

# name: (right program, wrong program, tests)
FORMS: dict[str, tuple[str, str, dict]] = {
    "random_pointer_list_from_the_test": (COPY_RANDOM, COPY_RANDOM_SHALLOW, case_assert(RANDOM_TEST)),
    "shared_graph_nodes_with_cycles": (CLONE_GRAPH, CLONE_GRAPH_WRONG, case_assert(GRAPH_TEST)),
    "random_pointer_pytest": (COPY_RANDOM, COPY_RANDOM_SHALLOW, case_pytest(
        "from solution import copyRandomList\n\n\n" + RANDOM_NODE +
        "def test_copy():\n    a, b = Node(1), Node(2)\n    a.next, a.random, b.random = b, b, b\n"
        "    h = copyRandomList(a)\n    assert h.random is h.next and h.next.random is h.next\n"
        "    assert (h.val, h.next.val) == (1, 2)\n")),
    "intersection_shared_tail": (INTERSECTION, INTERSECTION_BY_VALUE, case_assert(INTERSECTION_TEST)),
    "in_place_relink_and_long_cycle": (REORDER, REORDER_WRONG, case_assert(REORDER_TEST)),
    "test_class_subclasses_program_class": (STACK, STACK_WRONG, case_assert(SUBCLASS_TEST)),
    "pytest_subclass_of_program_class": (STACK, STACK_WRONG, case_pytest(
        "from solution import Stack\n\n\nclass Tracked(Stack):\n    def push(self, x):\n"
        "        self.last = x\n        return super().push(x)\n\n\ndef test_tracked():\n    t = Tracked()\n"
        "    t.push(3)\n    t.push(9)\n    assert t.last == 9 and t.pop() == 9 and t.size() == 1\n")),
    "pytest_warns": (WARN_PROGRAM, SILENT_PROGRAM, case_pytest(
        "import pytest\nfrom solution import parse, LegacyWarning\n\n\ndef test_warns():\n"
        "    with pytest.warns(DeprecationWarning, match='old'):\n        assert parse('12') == 12\n"
        "    with pytest.warns(LegacyWarning):\n        parse('3')\n")),
    "pytest_caplog": (WARN_PROGRAM, SILENT_PROGRAM, case_pytest(
        "import logging\nfrom solution import parse\n\n\ndef test_log(caplog):\n"
        "    with caplog.at_level(logging.INFO):\n        assert parse('x') is None\n        assert parse('4') == 4\n"
        "    assert 'bad input' in caplog.text\n    assert [r.levelname for r in caplog.records] == ['WARNING', 'INFO']\n"
        "    assert caplog.records[0].name == 'parser' and caplog.records[0].getMessage() == \"bad input 'x'\"\n")),
    "catch_warnings_record": (WARN_PROGRAM, SILENT_PROGRAM, case_assert(
        "import warnings\nwith warnings.catch_warnings(record=True) as w:\n    warnings.simplefilter('always')\n"
        "    assert parse('5') == 5\nassert len(w) == 1 and issubclass(w[0].category, DeprecationWarning)\n"
        "assert str(w[0].message) == 'old api'\n")),
    "unittest_assert_logs": (WARN_PROGRAM, SILENT_PROGRAM, case_assert(
        "import unittest\ntc = unittest.TestCase()\nwith tc.assertLogs('parser', level='WARNING') as cm:\n"
        "    parse('y')\nassert cm.output == [\"WARNING:parser:bad input 'y'\"]\n")),
}


def test_honest_form_passes_and_wrong_program_fails(form_verdicts, form):
    check_form(form_verdicts, form)


# --- the codec's object table and the events, without a sandbox -------------------------------------------
def test_object_table_keeps_shared_nodes_cycles_and_long_chains():
    from cotforge.curate.verify.sandbox.jailed import codec

    class Node:
        def __init__(self, v):
            self.val, self.next, self.random = v, None, None

    nodes = [Node(i) for i in range(100_000)]
    for a, b in zip(nodes, nodes[1:], strict=False):
        a.next = b
    nodes[0].random, nodes[-1].next = nodes[-1], nodes[500]  # a shared node and a cycle
    enc = codec.Encoder(objects=True, graph=True)
    args = [enc.enc(nodes[0]), enc.enc([nodes[-1], nodes[-1]])]
    rows = enc.objects_table()
    assert len(rows) == len(nodes)
    made = codec.Decoder(make=lambda name: codec.holder(name))
    made.load(rows)
    head, pair = made.dec(args[0]), made.dec(args[1])
    p = head
    for _ in range(500):
        p = p.next
    assert head.random is pair[0] is pair[1] and pair[0].next is p and p.val == 500
    assert type(head).__name__ == "Node" and head.next.next.val == 2


@pytest.mark.parametrize("rows", [{"a": 1}, [["Node"]], [["Node", [["val", ["OR", 5]]]]], [["Node", "x"]]])
def test_malformed_object_tables_are_refused(rows):
    from cotforge.curate.verify.sandbox.jailed import codec

    with pytest.raises(codec.CodecError):
        codec.Decoder(make=codec.holder).load(rows)


def test_back_sync_never_sets_a_dunder_and_checks_the_table_size():
    from cotforge.curate.verify.sandbox.jailed import codec
    from cotforge.curate.verify.sandbox.jailed.channel import Channel, ProtocolError

    class Box:
        def __init__(self):
            self.v = 1

    ch = Channel(-1, -1, 1 << 20, codec.ListNode, codec.TreeNode)
    box = Box()
    ch._sync([box], [[["__class__", ["OR", 0]], ["__dict__", ["D"]], ["v", 2]]])
    assert type(box) is Box and box.v == 2
    with pytest.raises(ProtocolError):
        ch._sync([box], [])
    assert isinstance(ch.broken, ProtocolError)


def test_replayed_events_stay_warnings_and_records():
    import logging
    import warnings

    from cotforge.curate.verify.sandbox.jailed import events

    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        events.replay([["w", ["AssertionError", "UserWarning", "Warning"], "m", 3],
                       ["w", ["SystemExit", "BaseException"], "n", 4]], {})
    assert [w.category for w in got] == [UserWarning, UserWarning]
    assert {w.filename for w in got} == {"solution.py"}
    seen = []
    handler = logging.Handler()
    handler.emit = seen.append
    logging.getLogger("prog").addHandler(handler)
    try:
        events.replay([["log", "prog", 40, "boom", 7, "f", None]], {})
    finally:
        logging.getLogger("prog").removeHandler(handler)
    assert [(r.name, r.levelname, r.getMessage(), r.pathname) for r in seen] == [("prog", "ERROR", "boom", "solution.py")]
    for bad in ([["w", "x", 1, 2]], [["log", "a", "b", "c", 1, "f", None]], "x", [["z"]]):
        with pytest.raises(events.Malformed):
            events.replay(bad, {})
