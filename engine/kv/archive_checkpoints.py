"""A state source for hybrid models: attention rows per message, recurrent checkpoints.

A hybrid model's state is its attention layers' KV, which is cut into rows
per message as a plain model's, followed by its recurrent layers' state, of
fixed size whatever the length and not cut by token (recurrent_layout.py).
That part is stored whole at message ends, as a 'snapshot' beside the rows,
and only where a restore is likely: the writer keeps the same checkpoints as
for whole snapshots (conversation heads, branch points, one per stretch of
tokens along a path; writer.superseded_by). A restore takes the deepest
checkpoint on the path that the rows reach, and the turn computes the rest.
"""

from chatdb.kv.store import CorruptKV

from ..llama.sequence import Sequence
from ..prompt.path_tokens import PathTokens
from ..state import kvlayout, recurrent_layout
from ..state.kvlayout import plane_width
from .archive_rows import ArchiveRows
from .modes import KVSource
from .sources import LoadFailed, Offer, Request, Vanished
from .writer import StoreJob


class ArchiveCheckpoints(ArchiveRows):
    kind = "rows"
    captures = True   # the question's end is a checkpoint worth taking (a regenerated answer)

    def offer(self, request: Request, seq: Sequence) -> "Offer | None":
        point = request.stored
        if point is None or point.kind != self.kind:
            return None
        kv = request.archive.kv
        checkpoints = kv.snapshots_along_path(point.message_id, self.fingerprint)
        # Deepest first; none past the limit: a recurrent state cannot be cut back.
        for ref in reversed(kv.rows_index(point.message_id, self.fingerprint)):
            n = request.tokens_through(ref.message_id)
            if ref.message_id in checkpoints and n <= request.limit:
                return Offer(KVSource.ARCHIVE, n, lambda seq, m=ref.message_id, n=n:
                             self.load(seq, request, m, n))
        return None

    def load(self, seq: Sequence, request: Request, message_id: int, n_tokens: int) -> None:
        attention = self.rows_state(request, message_id, n_tokens)
        segment = request.archive.kv.get(message_id, self.fingerprint, "snapshot")
        if segment is None:
            raise Vanished(f"message {message_id}: checkpoint dropped while reading")
        try:
            recurrent = segment.decode()
            if recurrent_layout.checkpoint_position(recurrent) != n_tokens - 1:
                raise kvlayout.LayoutMismatch(f"message {message_id}: the checkpoint is not "
                                              f"at the message's end")
        except (CorruptKV, kvlayout.LayoutMismatch) as exc:
            with request.archive.transaction():
                request.archive.kv.delete(message_id, self.fingerprint, "snapshot")
            raise LoadFailed(str(exc)) from None
        if not seq.load(recurrent_layout.join_hybrid(attention, recurrent), request.target[:n_tokens]):
            raise LoadFailed("llama.cpp refused the state")

    def store_job(self, seq: Sequence, full: PathTokens, earlier=None) -> StoreJob:
        """Every message's attention rows; checkpoints at the path's end and, from
        `earlier` (tokens, state) taken inside the turn, at the message ending there."""
        ends = full.ends()
        ranges = list(zip(full.message_ids, [0] + ends[:-1], ends))
        _, attention, recurrent = recurrent_layout.split_hybrid(seq.state())
        checkpoints = [(full.message_ids[-1], recurrent)]
        if earlier is not None and earlier[0] in ends[:-1]:
            _, _, at_question = recurrent_layout.split_hybrid(earlier[1])
            checkpoints.insert(0, (full.message_ids[ends.index(earlier[0])], at_question))
        return StoreJob(attention, self.fingerprint, ranges, self.kind, plane_width(seq.model),
                        checkpoints=tuple(checkpoints))
