"""The prelude LeetCode-style tests (DeepCoder / LeetCodeDataset) assume: imports, ListNode/TreeNode and their
helpers. It runs as the test's setup in both processes of an assert run: the program's (so reference
solutions find `List`, `TreeNode`...) and the test's (so `is_same_list` and the node classes the test uses
are these trusted ones, whatever the program defines).

Deviations from LeetCodeDataset's prelude: `from math import *` would shadow the builtin `pow` with
`math.pow` (two arguments, always float), breaking `pow(a, b, m)`, so the builtin is restored; and
`tree_node` walks a list instead of a `deque`, so the helpers need no import (see `setups.py`).
"""

from __future__ import annotations

LEETCODE_PRELUDE = '''\
from typing import *
from functools import *
from collections import *
from itertools import *
from heapq import *
from bisect import *
from string import *
from operator import *
from math import *
import math, heapq, bisect, collections, itertools, functools, string, re, random, datetime
from builtins import pow
inf = float("inf")


class ListNode:
    def __init__(self, val=0, next=None):
        self.val = val
        self.next = next


def list_node(values):
    head = cur = ListNode()
    for v in values:
        cur.next = ListNode(v)
        cur = cur.next
    return head.next


def is_same_list(a, b):
    while a and b:
        if a.val != b.val:
            return False
        a, b = a.next, b.next
    return a is None and b is None


class TreeNode:
    def __init__(self, val=0, left=None, right=None):
        self.val = val
        self.left = left
        self.right = right


def tree_node(values):
    if not values or values[0] is None:
        return None
    root = TreeNode(values[0])
    queue = [root]
    head, i = 0, 1
    while head < len(queue) and i < len(values):
        node = queue[head]
        head += 1
        if i < len(values) and values[i] is not None:
            node.left = TreeNode(values[i])
            queue.append(node.left)
        i += 1
        if i < len(values) and values[i] is not None:
            node.right = TreeNode(values[i])
            queue.append(node.right)
        i += 1
    return root


def is_same_tree(p, q):
    if not p and not q:
        return True
    if not p or not q:
        return False
    return p.val == q.val and is_same_tree(p.left, q.left) and is_same_tree(p.right, q.right)
'''


