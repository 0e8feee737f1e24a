"""A state source: the KV rows stored per message along the path, assembled into one state.

Every message from the root to the deepest point stored has its own rows
(a fork shares its ancestors'), so the state is their concatenation, rebuilt
on the decoder pool (segment_assembly.py). A damaged segment is deleted
here, so that the rows recomputed by the turn replace it.

With sliding-window layers (a layout with a window) a message's segment
holds the sliding-window rows of its last tokens only, as many as the state
it was cut from still held: a point is restorable where the segments cover
the window before it (kvlayout).
"""

from chatdb.kv.store import CorruptKV
from chatdb.storage.transaction import read_snapshot

from ..llama.sequence import Sequence
from ..prompt.path_tokens import PathTokens
from ..state import kvlayout
from ..state.kvlayout import plane_width
from ..state.segment_assembly import SegmentFault, assemble
from .modes import KVSource
from .sources import ArchiveSource, LoadFailed, Offer, Request, Vanished
from .writer import StoreJob


class ArchiveRows(ArchiveSource):
    kind = "rows"

    @property
    def captures(self) -> bool:
        """Whether a state from inside the turn (the question's end) helps store_job."""
        return self.layout.window is not None

    def load(self, seq: Sequence, request: Request, message_id: int, n_tokens: int) -> None:
        if not seq.load(self.rows_state(request, message_id, n_tokens), request.target[:n_tokens]):
            raise LoadFailed("llama.cpp refused the state")

    def rows_state(self, request: Request, message_id: int, n_tokens: int):
        """The state the rows from the root through `message_id` (`n_tokens` tokens) make.

        Read in one snapshot of the archive: a drop that another process commits
        meanwhile (keeping the budget), or the writer rewriting a segment of the path
        to share its leading rows with a new sibling (row_sharing.py), changes nothing
        this restore reads."""
        try:
            with read_snapshot(request.archive.conn):
                refs = request.archive.kv.rows_index(message_id, self.fingerprint)
                if sum(r.n_tokens for r in refs) != n_tokens:
                    raise Vanished(f"the rows stored hold other than the path's {n_tokens} tokens")
                return assemble(self.layout, refs, lambda ref: self._planes(request, ref.message_id),
                                lambda ref: self._shared_planes(request, ref.shared_id))
        except SegmentFault as fault:
            if fault.shared_id is not None:   # every segment beginning with it goes too
                with request.archive.transaction():
                    request.archive.kv.delete_shared(fault.shared_id)
            else:
                self.drop(request.archive, fault.message_id)
            raise LoadFailed(str(fault)) from None
        except (CorruptKV, kvlayout.LayoutMismatch) as exc:
            raise LoadFailed(str(exc)) from None

    def store_job(self, seq: Sequence, full: PathTokens, earlier=None) -> StoreJob:
        """Every message's rows."""
        ends = full.ends()
        ranges = list(zip(full.message_ids, [0] + ends[:-1], ends))
        return StoreJob(seq.state(), self.fingerprint, ranges, self.kind, plane_width(seq.model),
                        self.layout.window, earlier if self.layout.window else None)

    def offer(self, request: Request, seq: Sequence) -> "Offer | None":
        point = request.stored
        if self.layout.window is None or point is None or point.kind != self.kind:
            return super().offer(request, seq)
        message_id = covered_point(self.layout, request.archive.kv.rows_index(point.message_id,
                                                                              self.fingerprint))
        if message_id is None:
            return None
        n = request.tokens_through(message_id)
        return Offer(KVSource.ARCHIVE, min(n, request.limit),
                     lambda seq: self.load(seq, request, message_id, n))

    def _planes(self, request: Request, message_id: int):
        """A callable giving a segment's decoded planes: decoded early, or read now."""
        early = request.early.pop(message_id, None)
        if early is not None:
            return early.result
        segment = request.archive.kv.get(message_id, self.fingerprint, "rows")
        if segment is None:
            raise CorruptKV(f"message {message_id}: segment deleted while reading")
        return segment.planes

    def _shared_planes(self, request: Request, shared_id: int):
        """A callable giving a shared run's decoded planes, read now."""
        segment = request.archive.kv.get_shared(shared_id)
        if segment is None:
            raise CorruptKV(f"shared rows {shared_id}: deleted while reading")
        return segment.planes


def covered_point(layout: kvlayout.Layout, refs) -> "int | None":
    """The deepest message of `refs` (SegmentRef, root first) whose window of
    sliding-window rows the segments up to it hold."""
    spans = [(r.n_tokens, layout.tail(r.n_tokens, r.raw_size)) for r in refs]
    ends = [sum(n for n, _ in spans[:i + 1]) for i in range(len(spans))]
    for k in range(len(refs) - 1, -1, -1):
        need_from = ends[k] - layout.window
        if all(t >= end - max(end - n, need_from)
               for (n, t), end in zip(spans[:k + 1], ends) if end > need_from):
            return refs[k].message_id
    return None
