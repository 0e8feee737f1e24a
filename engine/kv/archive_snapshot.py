"""A state source: a whole state stored at a message (for memory that cannot be cut into rows).

Recurrent, hybrid and other models whose KV is not cut into rows store
these at message boundaries (kv_mode "snapshot"); the deepest one on the path stands alone.
A damaged one is deleted here, so the state stored after the turn replaces it.
"""

from chatdb.kv.store import CorruptKV

from ..llama.sequence import Sequence
from ..prompt.path_tokens import PathTokens
from .sources import ArchiveSource, LoadFailed, Request, Vanished
from .writer import StoreJob


class ArchiveSnapshot(ArchiveSource):
    kind = "snapshot"

    def load(self, seq: Sequence, request: Request, message_id: int, n_tokens: int) -> None:
        segment = request.archive.kv.get(message_id, self.fingerprint, "snapshot")
        if segment is None:
            raise Vanished(f"message {message_id}: snapshot dropped while reading")
        try:
            state = segment.decode()
        except CorruptKV as exc:
            self.drop(request.archive, message_id)
            raise LoadFailed(str(exc)) from None
        if not seq.load(state, request.target[:n_tokens]):
            raise LoadFailed("llama.cpp refused the state")

    def store_job(self, seq: Sequence, full: PathTokens, earlier=None) -> StoreJob:
        """The whole state, at the path's last message; the path's ranges tell the
        writer which older snapshots stay as checkpoints."""
        ends = full.ends()
        return StoreJob(seq.state(), self.fingerprint,
                        list(zip(full.message_ids, [0] + ends[:-1], ends)), self.kind, 1)
