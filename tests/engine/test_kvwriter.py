"""The KV writer thread: it never hangs flush()/close(), bounds its queue, reports errors once."""

import threading
import time

from engine.kv.writer import KVWriter, StoreJob

def _snapshot_job(message_id: int, payload: bytes = b"kv" * 512, kind: str = "snapshot") -> StoreJob:
    return StoreJob(memoryview(payload), "fp", [(message_id, 0, len(payload))], kind, 1)

def _messages(archive, n: int) -> list[int]:
    conv = archive.create_conversation("kv")
    return [archive.add_message(conv.id, "user", f"m{i}").id for i in range(n)]

def test_an_archive_it_cannot_open_fails_every_job_once_and_does_not_hang(tmp_path):
    errors = []
    writer = KVWriter(tmp_path, on_error=errors.append)  # a directory: not an archive
    for i in range(3):
        writer.submit(_snapshot_job(i + 1))
    writer.flush()
    writer.close()
    assert len(errors) == 1 and str(tmp_path) in str(errors[0])

def test_an_error_callback_that_raises_does_not_stop_the_thread(archive, db_path, capfd):
    first, second = _messages(archive, 2)

    def broken(exc):
        raise RuntimeError("callback broke")

    writer = KVWriter(db_path, on_error=broken)
    writer.submit(_snapshot_job(first, kind="nonsense"))   # fails to store
    writer.submit(_snapshot_job(first, kind="nonsense"))   # the same error: not reported again
    writer.submit(_snapshot_job(second))                  # still stored afterwards
    writer.close()
    assert archive.kv.has(second, "fp", "snapshot")
    assert not archive.kv.has(first, "fp", "snapshot")
    lines = capfd.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("chatdb: warning: KV not stored")

def test_queued_states_are_bounded_while_the_writer_is_blocked(archive, db_path):
    ids = _messages(archive, 5)
    writer = KVWriter(db_path, max_waiting=2)
    archive.conn.execute("BEGIN IMMEDIATE")   # the writer blocks on the write lock
    submitted = []

    def submit_all():
        for message_id in ids:
            writer.submit(_snapshot_job(message_id))
            submitted.append(message_id)

    feeder = threading.Thread(target=submit_all)
    feeder.start()
    deadline = time.monotonic() + 30
    # One job held by the blocked thread, two waiting: the fourth submit waits for room.
    while len(submitted) < 3 and time.monotonic() < deadline:
        feeder.join(0.01)
    assert len(submitted) == 3 and writer.waiting() == 2
    assert feeder.is_alive()
    archive.conn.execute("COMMIT")
    feeder.join()
    writer.close()   # every job taken (stored or reported), none left waiting
    assert writer.waiting() == 0 and len(submitted) == len(ids)
