"""A state source: a whole state stored at a message (for memory that cannot be cut into rows).

Sliding-window, recurrent and hybrid models store these at message
boundaries (kv_mode "snapshot"); the deepest one on the path stands alone.
A damaged one is deleted here, so the state stored after the turn replaces it.
"""

from chatdb.archive import Archive
from chatdb.kv import CorruptKV

from .kv_sources import LoadFailed, Offer, Request
from .sequence import Sequence


class ArchiveSnapshot:
    def __init__(self, fingerprint: str):
        self.fingerprint = fingerprint

    def offer(self, request: Request, seq: Sequence) -> "Offer | None":
        point = request.stored
        if point is None or point.kind != "snapshot":
            return None
        n = request.tokens_through(point.message_id)
        return Offer("archive", min(n, request.limit),
                     lambda seq: self._load(seq, request, point.message_id, n))

    def _load(self, seq: Sequence, request: Request, message_id: int, n_tokens: int) -> None:
        segment = request.archive.kv.get(message_id, self.fingerprint, "snapshot")
        if segment is None:
            raise LoadFailed(f"message {message_id}: snapshot deleted while reading")
        try:
            state = segment.decode()
        except CorruptKV as exc:
            self._drop(request.archive, message_id)
            raise LoadFailed(str(exc)) from None
        if not seq.load(state, request.target[:n_tokens]):
            raise LoadFailed("llama.cpp refused the state")

    def _drop(self, archive: Archive, message_id: int) -> None:
        with archive.transaction():
            archive.kv.delete(message_id, self.fingerprint, "snapshot")
