"""Every stored answer of one tokenizer, as hashed n-gram anchors: where a run of N tokens
was written before, and so what followed it.

Compact, in numpy arrays, and bounded:
  entries   uint64, sorted: a 32-bit hash of N tokens (high half) and the position just
            after them (low half) in the concatenation of the indexed answers, in id order
  ids       uint32 per answer: its message id (0 once deleted)
  starts    uint32 per answer: its first token's position in that concatenation
8 bytes per anchor and 8 per answer; the tokens themselves stay in the archive
(a guess reads a window of one array: chatdb.token_sources). Every position is
an anchor until the entries outgrow the budget; then only positions whose
hash has its low `shift` bits zero are kept (each time the budget is reached,
one bit more: half the entries go). A drafter looks up only such positions
of its own context, so a long repeat is still found within a few tokens.

Incremental: answers are read in id order after the last one indexed, as
bytes (never text, never tokenized again); deletions come from the log
migration 0016 keeps, and their anchors are dropped. New anchors go into a
small sorted part merged into the main one when it grows (like an LSM tree).
Persisted beside the archive (`<db>.draft-<tokenizer hash>.npz`, private) when a
good part of it is new, so that a process answering one question (`chatdb ask`)
reads a file instead of every array.
"""

import hashlib
import os
import zlib
from pathlib import Path

import numpy as np

N = 5                     # tokens hashed into an anchor
MASK32 = 0xFFFFFFFF
PRIME = 0x01000193        # FNV-1a's, then murmur3's finaliser: 32 bits, checked on use
MIX1, MIX2 = 0x85EBCA6B, 0xC2B2AE35
BATCH = 20_000            # answers read per query while indexing
MOST = 16                 # candidates one lookup returns (the newest)
SAVE_SHARE = 0.1          # unsaved share of the anchors that makes it save again
VERSION = 2


def anchor_hash(tokens) -> int:
    """The hash of N tokens (a sequence of ints), as `_hashes` computes it for arrays."""
    h = 0
    for t in tokens:
        h = ((h ^ int(t)) * PRIME) & MASK32
    h ^= h >> 16
    h = (h * MIX1) & MASK32
    h ^= h >> 13
    h = (h * MIX2) & MASK32
    return h ^ (h >> 16)


def _hashes(tokens: np.ndarray) -> np.ndarray:
    """anchor_hash of every N tokens of `tokens` (len - N + 1 of them), as uint32."""
    t = tokens.view(np.uint32)
    count = len(t) - N + 1
    h = np.zeros(count, np.uint32)
    with np.errstate(over="ignore"):
        for j in range(N):
            h ^= t[j:j + count]
            h *= np.uint32(PRIME)
        h ^= h >> np.uint32(16)
        h *= np.uint32(MIX1)
        h ^= h >> np.uint32(13)
        h *= np.uint32(MIX2)
        h ^= h >> np.uint32(16)
    return h


class ArchiveIndex:
    def __init__(self, tokenizer: str, budget_bytes: int = 64 << 20):
        self.tokenizer, self.budget = tokenizer, budget_bytes
        self._empty()

    def _empty(self) -> None:
        self.main = np.zeros(0, np.uint64)
        self.recent = np.zeros(0, np.uint64)
        self.ids = np.zeros(0, np.uint32)
        self.starts = np.zeros(0, np.uint32)
        self.total = 0         # tokens indexed
        self.shift = 0         # anchors kept: hash & (2**shift - 1) == 0
        self.last_id = 0       # the newest answer indexed
        self.last_log = 0      # the newest deletion-log row seen
        self.unsaved = 0       # anchors added since the file was written
        self.pending: list = []   # anchors added, not sorted in yet (refresh sorts them)

    # -- what a drafter asks --------------------------------------------------------

    @property
    def anchors(self) -> int:
        return len(self.main) + len(self.recent)

    @property
    def nbytes(self) -> int:
        return self.main.nbytes + self.recent.nbytes + self.ids.nbytes + self.starts.nbytes

    def kept(self, key: int) -> bool:
        """Whether anchors with this hash are indexed at all (the others never match)."""
        return key & ((1 << self.shift) - 1) == 0

    def lookup(self, key: int, most: int = MOST) -> "list[tuple[int, int]]":
        """(message id, offset just after the anchor) of up to `most` of the newest
        positions whose N tokens hash to `key`; hash collisions are the caller's to rule out."""
        lo_key, hi_key = np.uint64(key << 32), np.uint64((key << 32) | 0xFFFFFFFF)
        found = []
        for part in (self.main, self.recent):
            lo, hi = np.searchsorted(part, lo_key), np.searchsorted(part, hi_key, side="right")
            found.append(part[max(lo, hi - most):hi])
        positions = np.sort(np.concatenate(found) & np.uint64(0xFFFFFFFF))[::-1][:most]
        if not len(positions):
            return []
        rows = np.searchsorted(self.starts, positions.astype(np.uint32), side="right") - 1
        return [(int(self.ids[r]), int(p) - int(self.starts[r]))
                for r, p in zip(rows, positions) if self.ids[r]]

    # -- keeping it current -----------------------------------------------------------

    def refresh(self, sources) -> int:
        """Index the answers written since, drop those deleted since (`sources`: a
        chatdb.token_sources.TokenSources); how many answers were added."""
        first, newest = sources.deletion_log()
        if self.last_log < first:            # deletions were pruned before this saw them
            self._empty()
            self.last_log = newest
        gone = sources.deleted_after(self.tokenizer, self.last_log)
        if gone:
            self._drop({mid for _, mid in gone})
        self.last_log = max(self.last_log, newest)
        added = 0
        while True:
            rows = sources.answers_after(self.tokenizer, self.last_id, BATCH)
            if not rows:
                self._settle()
                return added
            self._add(rows)
            added += len(rows)

    def _add(self, rows) -> None:
        """Index (message id, token bytes) rows, in id order."""
        lengths = np.array([len(blob) // 4 for _, blob in rows], np.int64)
        tokens = np.frombuffer(b"".join(blob for _, blob in rows), "<i4")
        ends = np.cumsum(lengths)
        self.ids = np.concatenate([self.ids, np.array([m for m, _ in rows], np.uint32)])
        self.starts = np.concatenate([self.starts, (self.total + ends - lengths).astype(np.uint32)])
        self.last_id = rows[-1][0]
        if len(tokens) > N:
            keys = _hashes(tokens)[:len(tokens) - N]        # each followed by a token
            keep = (keys & np.uint32((1 << self.shift) - 1)) == 0
            # An anchor and the token after it lie in one answer: none in an answer's last N.
            across = (ends[:, None] - np.arange(1, N + 1)).ravel()
            keep[across[(across >= 0) & (across < len(keep))]] = False
            at = np.flatnonzero(keep)
            entries = (keys[at].astype(np.uint64) << np.uint64(32)) | (at + N + self.total).astype(np.uint64)
            self.pending.append(entries)
            self.unsaved += len(entries)
        self.total += len(tokens)
        if self.nbytes + sum(p.nbytes for p in self.pending) > self.budget:
            self._settle()
            while self.nbytes > self.budget and self.anchors:
                self._thin()

    def _settle(self) -> None:
        """Sort what was added into the recent part, and that into the main part once it
        is a good share of it."""
        if self.pending:
            self.recent = np.sort(np.concatenate([self.recent, *self.pending]))
            self.pending = []
        if len(self.recent) > max(1 << 16, len(self.main) // 4):
            self.main, self.recent = np.sort(np.concatenate([self.main, self.recent])), self.recent[:0]

    def _thin(self) -> None:
        """Keep half the anchors: those whose hash has one more low bit zero."""
        self.shift += 1
        mask = np.uint64(((1 << self.shift) - 1) << 32)
        self.main = self.main[(self.main & mask) == 0]
        self.recent = self.recent[(self.recent & mask) == 0]

    def _drop(self, message_ids: set) -> None:
        """Forget deleted answers: their anchors go, their rows stay (positions keep order)."""
        dead = np.isin(self.ids, np.fromiter(message_ids, np.uint32, len(message_ids)))
        if not dead.any():
            return
        self.ids[dead] = 0
        # SQLite gives the newest ids again once they are deleted: read from the newest left.
        self.last_id = int(self.ids.max()) if self.ids.any() else 0
        for name in ("main", "recent"):
            part = getattr(self, name)
            rows = np.searchsorted(self.starts, (part & np.uint64(0xFFFFFFFF)).astype(np.uint32),
                                   side="right") - 1
            setattr(self, name, part[~dead[rows]] if len(part) else part)
        self.unsaved += 1

    # -- the file -------------------------------------------------------------------

    @staticmethod
    def file_for(db_path: Path, tokenizer: str) -> Path:
        digest = hashlib.sha256(tokenizer.encode()).hexdigest()[:12]
        return Path(f"{db_path}.draft-{digest}.npz")

    def worth_saving(self) -> bool:
        return self.unsaved > max(50_000, SAVE_SHARE * self.anchors)

    def save(self, path: Path) -> None:
        """Write the index (private, atomically: a reader sees the old file or the new)."""
        head = np.array([VERSION, self.total, self.shift, self.last_id, self.last_log,
                         zlib.crc32(self.tokenizer.encode())], np.int64)
        partial = path.with_name(path.name + f".{os.getpid()}.tmp")
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as handle:
            np.savez(handle, head=head, entries=np.sort(np.concatenate([self.main, self.recent])),
                     ids=self.ids, starts=self.starts)
        os.replace(partial, path)
        self.unsaved = 0

    def load(self, path: Path) -> bool:
        """Read a saved index of this tokenizer; False (left empty) if none or unreadable."""
        try:
            with np.load(path) as data:   # a file of another version is built again
                head = data["head"]
                if head[0] != VERSION or head[5] != zlib.crc32(self.tokenizer.encode()):
                    return False
                self.main, self.ids, self.starts = data["entries"], data["ids"], data["starts"]
        except (OSError, ValueError, KeyError):
            return False
        self.recent = self.main[:0]
        self.total, self.shift, self.last_id, self.last_log = (int(x) for x in head[1:5])
        self.unsaved = 0
        return True
