"""KV made on the device and KV made on the CPU are never restored into each other: their
fingerprints differ, so the turn is recomputed, and that is said once."""

import json
import shutil

from ..engine.test_resume import FIRST, GREEDY_ARGS, SECOND, stored_tokens_through
from .conftest import run_chatdb, run_on_cpu

FOREIGN = "another model or configuration"


def _on_cpu(*args, db) -> "tuple[dict, str]":
    done = run_on_cpu(*args, db=db)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr


def test_device_kv_and_cpu_kv_are_never_restored_into_each_other(tmp_path):
    device_db, cpu_db = tmp_path / "device.db", tmp_path / "cpu.db"
    on_device, _ = run_chatdb("ask", "--json", *GREEDY_ARGS, FIRST, db=device_db)
    _on_cpu("ask", "--json", *GREEDY_ARGS, FIRST, db=cpu_db)
    device_print = run_chatdb("doctor", "--json", db=device_db)[0]["kv"]["fingerprint"]
    cpu_print = _on_cpu("doctor", "--json", db=cpu_db)[0]["kv"]["fingerprint"]
    assert device_print != cpu_print
    for db in (device_db, cpu_db):   # what each turn below must answer: a recomputation
        shutil.copy(db, db.with_suffix(".copy"))

    # The CPU continues the device's chat: nothing restored, recomputed, said once.
    cpu_next, said = _on_cpu("ask", "--json", "-c", *GREEDY_ARGS, SECOND, db=device_db)
    assert cpu_next["kv"]["restored_tokens"] == 0 and said.count(FOREIGN) == 1, said
    recomputed, _ = _on_cpu("ask", "--json", "-c", "--no-kv", *GREEDY_ARGS, SECOND,
                            db=device_db.with_suffix(".copy"))
    assert cpu_next["text"] == recomputed["text"]

    # The device continues the CPU's chat: the same the other way.
    device_next, proc = run_chatdb("ask", "--json", "-c", *GREEDY_ARGS, SECOND, db=cpu_db)
    assert device_next["kv"]["restored_tokens"] == 0 and proc.stderr.count(FOREIGN) == 1, proc.stderr
    assert proc.stderr.count("\n") == 1
    recomputed, _ = run_chatdb("ask", "--json", "-c", "--no-kv", *GREEDY_ARGS, SECOND,
                               db=cpu_db.with_suffix(".copy"))
    assert device_next["text"] == recomputed["text"]

    # Each restores its own KV and only its own, beside the other's.
    again, proc = run_chatdb("ask", "--json", "-c", *GREEDY_ARGS, "Thanks!", db=device_db)
    assert again["kv"]["source"] == "archive" and proc.stderr == ""
    assert again["kv"]["restored_tokens"] == stored_tokens_through(device_db, on_device["message_id"])
