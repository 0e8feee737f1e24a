"""bench/serve.py's long-history parts: a long chat resent after a restart, and the disk
ten chats sharing a prefix take; chatdb serve against llama-cpp-python's server.

Each client sends the whole conversation, as OpenAI clients do. chatdb finds
it in the archive and restores its KV; llama-cpp-python's server re-reads it
(as it starts by default) or loads the longest cached prompt's whole state
from its disk cache (--cache true --cache_type disk).
"""

import statistics
from pathlib import Path

import diskcache   # llama-cpp-python's own dependency

from serve_clients import chatdb_server, disk_bytes, lcp_server, stream_chat

WORDS = ("river stone lantern harbour winter market violin garden copper meadow "
         "engine ladder orchard compass thunder pepper island velvet canyon ember").split()
TARGETS = {"lcp": 30, "lcp-disk": 2}   # how many times slower than chatdb each should be
ANSWER_TOKENS = 16


def user(text: str) -> dict:
    return {"role": "user", "content": text}


def filler(seed: int, words: int) -> str:
    """Prose-like text that differs with the seed (about 1.3 tokens a word)."""
    out = [WORDS[(seed * 7 + i * i * 3 + i) % len(WORDS)] for i in range(words)]
    return " ".join(out[i] + ("." if i % 11 == 10 else "") for i in range(words))


def history(seed: int, tokens: int, prefix: "list | None" = None) -> list:
    """A conversation of about `tokens` tokens, ending with a user message."""
    messages = list(prefix or [{"role": "system", "content": "You are a helpful assistant."}])
    turn = len(messages)
    while sum(len(m["content"].split()) for m in messages) * 1.3 < tokens:
        role = "user" if turn % 2 else "assistant"
        messages.append({"role": role, "content": filler(seed * 101 + turn, 280)})
        turn += 1
    if messages[-1]["role"] != "user":
        messages.append(user(filler(seed, 40)))
    return messages


def follow_up(chat: list, answer: str) -> list:
    return chat + [{"role": "assistant", "content": answer}, user("Thanks. In one line, what next?")]


def _restarted(start, chat) -> "tuple[float, int]":
    """Ask `chat` on one server process, then resend it with a follow-up as the first
    request to a new one: (time to first token, prompt tokens, those reported cached).

    No warm-up request: llama-cpp-python's disk cache pops the entry a lookup
    finds, so any other first request (they all share the template's first
    tokens) would take the conversation's state away."""
    with start() as first:
        answer = stream_chat(first.base, chat, ANSWER_TOKENS).text
    with start() as again:
        timed = stream_chat(again.base, follow_up(chat, answer), 8)
    return timed.ttft, timed.prompt, timed.cached


def _fresh(start, chat) -> "tuple[float, int]":
    """A server that never saw `chat` gets it with a follow-up (the default llama-cpp-python
    server after a restart: it keeps nothing)."""
    with start() as server:
        timed = stream_chat(server.base, follow_up(chat, filler(3, 12)), 8)
    return timed.ttft, timed.prompt, timed.cached


def resume_after_restart(args, work: Path, model: str, threads) -> None:
    print(f"\n2. time to first token: a {args.history}-token conversation resent after a restart"
          f"\n   as the first request a new server process gets (median of {args.repeat})")
    ttft = {"chatdb": [], "lcp": [], "lcp-disk": []}
    tokens = {name: (0, 0) for name in ttft}
    for r in range(args.repeat):   # interleaved: each repeat runs every server once
        chat = history(100 + r, args.history)
        db = work / f"resume-{r}.db"
        runs = [("chatdb", lambda: _restarted(lambda: chatdb_server(db, work, 1, args.threads), chat))]
        if args.lcp_deps:
            disk = work / f"lcp-disk-{r}"
            disk.mkdir()
            runs += [("lcp", lambda: _fresh(lambda: lcp_server(model, work, args.lcp_deps, threads()),
                                            chat)),
                     ("lcp-disk", lambda: _restarted(lambda: lcp_server(
                         model, disk, args.lcp_deps, threads(), disk_cache=True), chat))]
        for name, run in runs:
            seconds, *tokens[name] = run()
            ttft[name].append(seconds)
    ours = statistics.median(ttft["chatdb"])
    print(f"{'server':<40} {'ttft ms':>8} {'prompt':>7} {'cached':>7} {'vs chatdb':>9}"
          f" {'target':>11}")
    labels = {"chatdb": "chatdb serve (KV from the archive)",
              "lcp": "llama-cpp-python server, as it starts", "lcp-disk": "llama-cpp-python, disk cache"}
    for name, values in ttft.items():
        if not values:
            continue
        median, target = statistics.median(values), TARGETS.get(name)
        verdict = f">={target}x {'met' if median / ours >= target else 'MISSED'}" if target else ""
        prompt, cached = tokens[name]
        print(f"{labels[name]:<40} {median * 1000:>8.0f} {prompt:>7} {cached:>7}"
              f" {median / ours:>8.1f}x {verdict:>11}")


def disk_for_shared_prefix(args, work: Path, model: str, threads) -> None:
    print(f"\n3. disk for ten {args.history}-token conversations sharing an"
          f" {int(args.history * 0.8)}-token prefix")
    prefix = history(7, int(args.history * 0.8))
    chats = [history(20 + i, args.history, prefix=prefix + [user(filler(50 + i, 60))])
             for i in range(10)]
    db = work / "shared.db"
    with chatdb_server(db, work, 1, args.threads) as server:
        for chat in chats:
            stream_chat(server.base, chat, 1)
    ours = disk_bytes(db, Path(f"{db}-wal"))
    print(f"{'server':<40} {'MB':>8} {'vs chatdb':>9}")
    print(f"{'chatdb serve (whole archive)':<40} {ours / 1e6:>8.1f} {1:>8.1f}x")
    if args.lcp_deps:
        cache = work / "lcp-shared"
        cache.mkdir()
        with lcp_server(model, cache, args.lcp_deps, threads(), disk_cache=True) as server:
            for chat in chats:
                stream_chat(server.base, chat, 1)
        theirs = disk_bytes(cache / ".cache")
        print(f"{'llama-cpp-python, disk cache':<40} {theirs / 1e6:>8.1f} {theirs / ours:>8.1f}x")
        kept = len(diskcache.Cache(str(cache / ".cache" / "llama_cache")))
        print(f"   it can resume {kept} of the ten from that (chatdb: all ten)"
              + ("; a lookup pops the entry it finds and stores the answer's state in its place"
                 if kept < len(chats) else ""))
