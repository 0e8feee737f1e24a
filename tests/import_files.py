"""Large import files made fast, and what importing each must give.

The memory test of imports and bench/import_memory.py share these. Both
formats have branches, and a file's conversations are written one at a time,
so that a file of a million messages never sits in this process's memory.

- chatdb's export: each conversation a system prompt, a chain of questions and
  answers and a regenerated answer; every fourth is a fork of the one after it
  in the file, listing the history it shares, whose writer comes later.
- ChatGPT's conversations.json: the empty root node, a hidden system node, a
  chain with an edited question, a tool call and its output (both skipped),
  children listed before their parents.
"""

import json
from pathlib import Path

PER_CONVERSATION = 20   # messages imported from each conversation (both formats)
SHARED = 5              # of them, those a chatdb fork shares with its origin
WORDS = ("the tide came in over the stones", "a lifetime is a scope", "借用 and borrowing",
         "rows rest in a quiet page", "what the model reads is the path")


def _text(n: int) -> str:
    return f"{n}: {WORDS[n % len(WORDS)]}"


def _time(n: int) -> str:
    return f"2024-03-01T{n // 3_600_000 % 24:02d}:{n // 60_000 % 60:02d}:{n // 1000 % 60:02d}.{n % 1000:03d}Z"


def write_chatdb_export(path: Path, messages: int) -> int:
    """A chatdb export of at least `messages` messages in all (returns how many)."""
    count, number = 0, 0
    with open(path, "w", encoding="utf-8") as out:
        out.write('{"format": "chatdb-export", "version": 1, "conversations": [')
        while count < messages:
            for conversation in _chatdb_group(number):
                out.write((",\n" if number or conversation["uid"] != "conv-0" else "")
                          + json.dumps(conversation, ensure_ascii=False))
            number += 4
            count += 4 * PER_CONVERSATION - SHARED
        out.write("]}\n")
    return count


def _chatdb_group(number: int) -> list[dict]:
    """Four conversations: a fork of the next one, then three that stand alone."""
    origin = _chatdb_conversation(number + 1)
    shared = [dict(m) for m in origin["messages"][:SHARED]]
    uid, base = f"conv-{number}", number * PER_CONVERSATION
    own, parent = [], shared[-1]["uid"]
    for k in range(SHARED, PER_CONVERSATION):
        own.append({"uid": f"m-{base + k}", "parent": parent, "conversation": uid,
                    "role": "user" if k % 2 else "assistant", "content": _text(base + k),
                    "status": "complete", "created_at": _time(base + k), "meta": {}})
        parent = own[-1]["uid"]
    fork = {"uid": uid, "title": f"Chat {number}", "created_at": _time(base),
            "updated_at": _time(base + PER_CONVERSATION), "system_prompt": shared[0]["content"],
            "model": "smol", "meta": {"forked_from": shared[-1]["uid"]}, "head": parent,
            "messages": shared + own}
    return [fork, origin] + [_chatdb_conversation(number + k) for k in (2, 3)]


def _chatdb_conversation(number: int) -> dict:
    uid = f"conv-{number}"
    base = number * PER_CONVERSATION
    messages, parent = [], None
    for k in range(PER_CONVERSATION):
        role = "system" if k == 0 else ("user" if k % 2 else "assistant")
        # The last message is a regenerated answer: a sibling of the one before it.
        above = messages[-2]["uid"] if k == PER_CONVERSATION - 1 else parent
        message = {"uid": f"m-{base + k}", "parent": above, "conversation": uid, "role": role,
                   "content": _text(base + k), "status": "complete",
                   "created_at": _time(base + k), "meta": {}}
        messages.append(message)
        parent = message["uid"]
    return {"uid": uid, "title": f"Chat {number}", "created_at": _time(base),
            "updated_at": _time(base + PER_CONVERSATION), "system_prompt": messages[0]["content"],
            "model": "smol", "meta": {}, "head": messages[-2]["uid"], "messages": messages}


def write_chatgpt_export(path: Path, messages: int) -> int:
    """A conversations.json of about `messages` imported messages (returns how many)."""
    count = 0
    with open(path, "w", encoding="utf-8") as out:
        out.write("[")
        for number in range(max(1, messages // PER_CONVERSATION)):
            out.write(("" if number == 0 else ",\n")
                      + json.dumps(_chatgpt_conversation(number), ensure_ascii=False))
            count += PER_CONVERSATION
        out.write("]\n")
    return count


def _node(key, parent, role=None, text=None, t=None, **message):
    body = None
    if role:
        body = {"id": key, "author": {"role": role, "name": None, "metadata": {}},
                "content": {"content_type": "text", "parts": [text]}, "create_time": t,
                "status": "finished_successfully", "weight": 1.0,
                "metadata": {"model_slug": "gpt-4o", "request_id": f"req-{key}"},
                "recipient": "all", **message}
    return key, {"id": key, "message": body, "parent": parent, "children": []}


def _chatgpt_conversation(number: int) -> dict:
    """PER_CONVERSATION kept messages: a chain, an edited question, a skipped tool call."""
    base = number * PER_CONVERSATION
    t = 1_700_000_000.0 + base
    nodes = [_node(f"r{base}", None),
             _node(f"s{base}", f"r{base}", "system", "", t,
                   metadata={"is_visually_hidden_from_conversation": True})]
    parent = f"s{base}"
    for k in range(PER_CONVERSATION - 1):
        key = f"n{base + k}"
        nodes.append(_node(key, parent, "user" if k % 2 == 0 else "assistant",
                           _text(base + k), t + k))
        parent = key
    edited = f"n{base + PER_CONVERSATION - 1}"   # a sibling of the last question
    nodes.append(_node(edited, f"n{base + PER_CONVERSATION - 4}", "user",
                       _text(base + PER_CONVERSATION - 1), t + PER_CONVERSATION))
    call, output = f"c{base}", f"o{base}"
    nodes.append(_node(call, edited, "assistant", "search('x')", t + PER_CONVERSATION + 1,
                       recipient="browser"))
    nodes.append(_node(output, call, "tool", "results", t + PER_CONVERSATION + 2))
    return {"title": f"Chat {number}", "create_time": t, "update_time": t + PER_CONVERSATION + 3,
            "mapping": dict(reversed(nodes)), "current_node": output, "id": f"g{number}",
            "default_model_slug": "gpt-4o", "moderation_results": [], "is_archived": False}


def expected_chatgpt_rows(messages: int) -> tuple[set, dict]:
    """What importing write_chatgpt_export(messages) must store: the set of
    (message uid, parent uid, role, content, writer uid), and each conversation's head."""
    rows, heads = set(), {}
    for number in range(max(1, messages // PER_CONVERSATION)):
        base, conv = number * PER_CONVERSATION, f"chatgpt:g{number}"
        parent = None
        for k in range(PER_CONVERSATION - 1):
            uid = f"{conv}:n{base + k}"
            rows.add((uid, parent, "user" if k % 2 == 0 else "assistant", _text(base + k), conv))
            parent = uid
        edited = f"{conv}:n{base + PER_CONVERSATION - 1}"
        rows.add((edited, f"{conv}:n{base + PER_CONVERSATION - 4}", "user",
                  _text(base + PER_CONVERSATION - 1), conv))
        heads[conv] = edited   # current_node is the tool's output: its nearest kept ancestor
    return rows, heads
