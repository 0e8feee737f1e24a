"""Storing a message's rows so that siblings keep the leading rows they hold alike once.

Siblings (children of one parent) begin at the same position after the
same state, and often with the same tokens: a template's turn opening, a
regenerated answer, a question asked again in other words. Their leading
rows are then the same bytes, and a run of them is stored once
(kv_shared_rows); each segment names the run and holds only its other rows.
What is compared is the rows themselves, never the tokens: a run is shared
only where the bytes are identical, so every restore is exactly what was
stored.

A new message's segment is compared with its latest siblings'. A sibling
whose rows already begin with a run that the new rows begin with too lends
that run; a sibling without one is rewritten to begin with the run the two
have in common. The sharing plan is made (and compressed) outside the transaction;
`store` writes it, and rewrites the sibling only if it is unchanged since.
"""

import hashlib
from dataclasses import dataclass

from chatdb.kv.store import CorruptKV, Encoded, SegmentRef, encode

from ..state.kvlayout import Layout, LayoutMismatch
from ..state.segment_split import join_pieces, leading_equal, split_segment

SIBLINGS_COMPARED = 16   # the latest siblings: each costs a decompression of its rows


@dataclass(frozen=True)
class Rewrite:
    message_id: int
    rest: Encoded       # its rows after the shared run
    was: str            # its segment's checksum when read


@dataclass(frozen=True)
class SharingPlan:
    rest: Encoded                       # the message's own rows (all of them when nothing is shared)
    n_shared: int = 0                   # tokens of the shared run it begins with
    digest: str = ""
    shared: "Encoded | None" = None
    rewrite: "Rewrite | None" = None    # the sibling to begin with the same run


def plan_sharing(archive, fingerprint: str, layout: Layout, message_id: int, raw, n_tokens: int,
         plane_width: int) -> SharingPlan:
    best = (0, False, None, None, None)   # (tokens shared, lent by the sibling, ref, its segment, its rows)
    for ref in archive.kv.sibling_rows(message_id, fingerprint, SIBLINGS_COMPARED):
        try:
            segment, rows = _rows_of(archive, fingerprint, layout, ref)
            # Each keeps a row of its own: no segment is left empty.
            k = min(leading_equal(layout, raw, n_tokens, rows, ref.n_tokens), n_tokens - 1, ref.n_tokens - 1)
        except (CorruptKV, LayoutMismatch):
            continue   # a damaged sibling lends nothing (its restore deletes it)
        lent = ref.shared_id is not None
        usable = (ref.shared_tokens if ref.shared_tokens <= k else 0) if lent else k
        best = max(best, (usable, lent, ref, segment, rows), key=lambda b: b[:2])
    k, lent, ref, segment, rows = best
    if k == 0:
        return SharingPlan(encode(raw, plane_width))
    head, rest = split_segment(layout, raw, n_tokens, k)
    rewrite = None
    if not lent:
        rewrite = Rewrite(ref.message_id, encode(split_segment(layout, rows, ref.n_tokens, k)[1], plane_width),
                          segment.checksum)
    return SharingPlan(encode(rest, plane_width), k, hashlib.sha256(head).hexdigest(),
                encode(head, plane_width), rewrite)


def size(plan: SharingPlan) -> int:
    """The bytes storing the plan adds at most (a shared run already stored adds none)."""
    return (len(plan.rest.blob) + (len(plan.shared.blob) if plan.shared is not None else 0)
            + (len(plan.rewrite.rest.blob) if plan.rewrite is not None else 0))


def store(archive, fingerprint: str, message_id: int, n_tokens: int, plan: SharingPlan) -> int:
    """Write the plan inside the caller's transaction; the bytes it added."""
    shared_id, added = None, 0
    if plan.n_shared:
        shared_id, added = archive.kv.put_shared(fingerprint, plan.digest, plan.n_shared, plan.shared)
        if plan.rewrite is not None:
            # Changed meanwhile (another process): then only this message begins with the run.
            archive.kv.share(plan.rewrite.message_id, fingerprint, shared_id, plan.rewrite.rest,
                             plan.rewrite.was)
    return added + archive.kv.put_encoded(message_id, fingerprint, "rows", n_tokens, plan.rest, shared_id)


def _rows_of(archive, fingerprint: str, layout: Layout, ref: SegmentRef):
    """A sibling's segment as stored, and all its rows (its shared run joined back)."""
    segment = archive.kv.get(ref.message_id, fingerprint)
    if segment is None:
        raise CorruptKV("deleted meanwhile")
    own = segment.decode()
    if ref.shared_id is None:
        return segment, own
    shared = archive.kv.get_shared(ref.shared_id)
    if shared is None:
        raise CorruptKV("deleted meanwhile")
    return segment, join_pieces(layout, shared.decode(), ref.shared_tokens, own, ref.n_tokens)
