"""Which KV to drop when storing would pass the budget: what is worth least per byte.

A message's rows restore only together with the rows of every message above it
on its path, so rows are dropped from the ends of paths back (a leaf: a segment
with no stored rows below it under its key). A chat thus keeps the KV of its
first messages, and a restore computes the rest.

What a leaf is worth is what a restore through it saves, times how likely one
is. It saves computing its tokens, and a token costs more the deeper it sits
(its attention reads every earlier one): 1 + position / `span`, where `span`
is the position at which attention costs as much as the rest of a token's
forward pass (the engine derives it from the model). How likely: from how
recently the paths through it were used (restored, or written by a turn),
each point a path ended at weighing 1/r for the r-th most recently used, and
summed over every point below the segment, so that rows shared by forks (a
chat's first messages, under each of its branches) count once with the worth
of every chat using them. Divided by the bytes that dropping it frees (a run
of rows shared by siblings is freed with the last segment naming it).

Before any of those goes what no restore uses: a hybrid model's rows past its
deepest checkpoint (its recurrent state exists only there), then checkpoints
and snapshots that are neither at a conversation's head nor at a branch
point (a deeper one serves their path; a fork from the middle of a chat
then recomputes from the one above it).

Everything here reads the archive only: `plan` says what to drop, in order,
and the caller deletes it in the same transaction (keeping.py).
"""

import heapq
import itertools
from dataclasses import dataclass, field

SEGMENTS = """
SELECT message_id, fingerprint, kind, n_tokens, length(data), shared_id, created_at FROM kv_segments"""
SHARED_SIZES = "SELECT id, length(data) FROM kv_shared_rows"
PARENTS = "SELECT id, parent_id FROM messages"
HEADS = "SELECT DISTINCT head_id FROM conversations WHERE head_id IS NOT NULL"
BRANCH_POINTS = "SELECT parent_id FROM messages WHERE parent_id IS NOT NULL GROUP BY parent_id HAVING count(*) > 1"
USES = "SELECT message_id, fingerprint, used_at FROM kv_uses"

DEFAULT_SPAN = 4096   # `span` where no model says: SmolLM2-135M's (larger models' are longer)

# Classes, dropped in this order; by worth per byte within each.
UNUSED, INTERIOR, VALUED = 0, 1, 2


@dataclass(frozen=True)
class Victim:
    message_id: int
    fingerprint: str
    kind: str          # 'rows' or 'snapshot'
    size: int          # bytes its blob holds


@dataclass
class _Node:
    """The KV of one message under one key: rows, a snapshot, or both (a hybrid's checkpoint)."""
    message_id: int
    rows: "tuple | None" = None      # (n_tokens, size, shared_id, created_at)
    snapshot: "tuple | None" = None
    up: "_Node | None" = None        # the nearest message above with rows under the key
    below: int = 0                   # nodes with rows whose `up` is this one, not yet dropped
    start: int = 0                   # the position of its first token
    worth: float = 0.0               # summed weight of the points it serves
    version: int = 0                 # bumped when its entry in the heap goes stale
    uses: list = field(default_factory=list)


def plan(conn, need: int, protect=frozenset(), span: int = DEFAULT_SPAN) -> "list[Victim]":
    """Segments to drop, in order, until at least `need` bytes are freed (fewer if all
    else is protected). `protect`: message ids whose KV stays (the path being stored)."""
    if need <= 0:
        return []
    world = _World(conn, span)
    return world.drops(need, set(protect))


class _World:
    def __init__(self, conn, span: int):
        self.span = max(1, span)
        self.parents = dict(conn.execute(PARENTS).fetchall())
        self.heads = {r[0] for r in conn.execute(HEADS)}
        self.branches = {r[0] for r in conn.execute(BRANCH_POINTS)}
        self.shared_size = dict(conn.execute(SHARED_SIZES).fetchall())
        self.naming: dict[int, list] = {}   # shared run -> (key, node) of the segments naming it
        self.keys: dict[str, dict[int, _Node]] = {}
        for message_id, key, kind, n_tokens, size, shared_id, created_at in conn.execute(SEGMENTS):
            node = self.keys.setdefault(key, {}).setdefault(message_id, _Node(message_id))
            setattr(node, kind, (n_tokens, size, shared_id, created_at))
            if shared_id is not None:
                self.naming.setdefault(shared_id, []).append((key, node))
        self.shared_count = {run: len(named) for run, named in self.naming.items()}
        self.hybrid = {}   # key -> whether it holds rows and checkpoints (a hybrid model's)
        for key, nodes in self.keys.items():
            self._link(nodes)
            self.hybrid[key] = (any(n.snapshot for n in nodes.values())
                                and any(n.rows for n in nodes.values()))
        self._weigh(conn.execute(USES).fetchall())

    # -- the shape: chains of rows, and where each point's path ends --------------

    def _link(self, nodes: "dict[int, _Node]") -> None:
        """Each node's nearest node with rows above it, and the positions of its tokens."""
        for node in nodes.values():
            node.up = self._above(nodes, node.message_id, rows=True)
            if node.rows is not None and node.up is not None:
                node.up.below += 1
        # A parent is written before its children, so message ids order every path.
        for node in sorted(nodes.values(), key=lambda n: n.message_id):
            node.start = node.up.start + node.up.rows[0] if node.up is not None else 0

    def _above(self, nodes, message_id: int, rows: bool) -> "_Node | None":
        parent = self.parents.get(message_id)
        while parent is not None:
            node = nodes.get(parent)
            if node is not None and (not rows or node.rows is not None):
                return node
            parent = self.parents.get(parent)
        return None

    def _serving(self, nodes, message_id: int) -> "_Node | None":
        """The node a restore at `message_id` starts from: the message's own, else the
        nearest above."""
        node = nodes.get(message_id)
        return node if node is not None else self._above(nodes, message_id, rows=False)

    def _weigh(self, uses) -> None:
        """Every node's worth: the weights (1/rank by recency) of the points it serves.
        A leaf that no recorded use reaches counts as used when it was written."""
        points = []   # (used_at, message_id, key, node)
        reached: set[int] = set()
        for message_id, key, used_at in uses:
            nodes = self.keys.get(key)
            node = self._serving(nodes, message_id) if nodes else None
            if node is not None:
                points.append((used_at, message_id, key, node))
                reached.update(id(n) for n in self._chain(node))
        for key, nodes in self.keys.items():
            for node in nodes.values():
                if node.below == 0 and id(node) not in reached:
                    written = (node.rows or node.snapshot)[3]
                    points.append((written, node.message_id, key, node))
        points.sort(key=lambda p: (p[0], p[1]), reverse=True)
        for rank, (_, _, _, node) in enumerate(points, start=1):
            weight = 1.0 / rank
            if node.snapshot is not None:
                node.uses.append(weight)   # a snapshot serves only the points it is the nearest to
            for up in self._chain(node):
                if up.rows is not None:
                    up.worth += weight

    def _chain(self, node: _Node):
        while node is not None:
            yield node
            node = node.up

    # -- the order --------------------------------------------------------------

    def drops(self, need: int, protect: set) -> "list[Victim]":
        self.heap, self.counter, self.protect = [], itertools.count(), protect
        for key, nodes in self.keys.items():
            for node in nodes.values():
                self._push(key, node)
        victims, freed = [], 0
        while self.heap and freed < need:
            _, _, _, version, key, node, kind = heapq.heappop(self.heap)
            if version != node.version:
                continue   # stale: its worth, its bytes or what it holds changed since
            for dropped in self._take(node, kind, self.hybrid[key]):
                n_tokens, size, shared_id, _ = getattr(node, dropped)
                setattr(node, dropped, None)
                victims.append(Victim(node.message_id, key, dropped, size))
                freed += size + self._release(shared_id)
            self._changed(key, node)
            if kind == "rows" and node.up is not None:
                node.up.below -= 1
                self._changed(key, node.up)
        return victims

    def _changed(self, key: str, node: _Node) -> None:
        """Its entries in the heap go stale; what it still holds is ranked again."""
        node.version += 1
        self._push(key, node)

    def _take(self, node: _Node, kind: str, hybrid: bool) -> list[str]:
        """What goes together: a hybrid's checkpoint goes with the rows it ends."""
        if kind == "rows" and hybrid and node.snapshot is not None:
            return ["rows", "snapshot"]
        return [kind]

    def _push(self, key: str, node: _Node) -> None:
        """Rank what of `node` may go now: rows at the end of a path, a snapshot (a
        hybrid's checkpoint goes with its rows, unless rows below it still need them)."""
        if node.message_id in self.protect:
            return
        hybrid = self.hybrid[key]
        if node.rows is not None and node.below == 0:
            heapq.heappush(self.heap, (*self._rank_rows(node, hybrid), next(self.counter),
                                       node.version, key, node, "rows"))
        if node.snapshot is not None and (node.rows is None or not hybrid or node.below > 0):
            heapq.heappush(self.heap, (*self._rank_snapshot(node), next(self.counter),
                                       node.version, key, node, "snapshot"))

    def _rank_rows(self, node: _Node, hybrid: bool) -> "tuple[int, float]":
        if hybrid and node.snapshot is None:
            return UNUSED, 0.0   # no checkpoint here: nothing restores at its end
        n_tokens, size, shared_id, _ = node.rows
        extra = node.snapshot[1] if hybrid and node.snapshot else 0
        saved = n_tokens * (1 + (node.start + (n_tokens - 1) / 2) / self.span)
        return VALUED, node.worth * saved / max(1, size + extra + self._sole(shared_id))

    def _rank_snapshot(self, node: _Node) -> "tuple[int, float]":
        if node.message_id not in self.heads and node.message_id not in self.branches:
            return INTERIOR, sum(node.uses)
        n_tokens, size, _, _ = node.snapshot
        saved = n_tokens * (1 + (n_tokens - 1) / 2 / self.span)
        return VALUED, sum(node.uses) * saved / max(1, size)

    def _sole(self, shared_id: "int | None") -> int:
        """Bytes of the shared run this segment is the last to name (0: others name it)."""
        if shared_id is None or self.shared_count.get(shared_id, 0) != 1:
            return 0
        return self.shared_size.get(shared_id, 0)

    def _release(self, shared_id: "int | None") -> int:
        """A segment naming `shared_id` is dropped: the run's bytes if it was the last."""
        if shared_id is None:
            return 0
        self.shared_count[shared_id] -= 1
        if self.shared_count[shared_id] == 0:
            return self.shared_size.get(shared_id, 0)
        if self.shared_count[shared_id] == 1:   # the one left now frees the run too: worth less per byte
            for key, node in self.naming[shared_id]:
                if node.rows is not None and node.rows[2] == shared_id:
                    self._changed(key, node)
        return 0
