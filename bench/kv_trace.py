"""The chats and the reopening trace bench/kv_budget.py replays, and the plain LRU baseline.

Chats: `n` conversations, each a system prompt and turns of made-up text
until it holds its target of `low` to `high` tokens (seeded). The trace: a
person who keeps a few chats going and now and then goes back to old ones.
A working set of the WORKING most recently active chats gets most reopenings
(the more recently used within it, the likelier); some reopenings look
something up in an old chat once; and now and then an old chat comes back
into the working set, pushing out its least recently used one. Each
reopening adds a question and an answer.

LRUByConversation is the baseline: when storing would pass the budget, the
KV of the least recently used conversations goes, whole.
"""

import random
import re
from dataclasses import dataclass, field
from pathlib import Path

WORKING = 5          # chats in the working set
P_WORKING = 0.75     # a reopening of a chat in it
P_ONE_OFF = 0.15     # a look at an old chat (which stays out of the working set)
# the rest: an old chat comes back into the working set

ROOT = Path(__file__).resolve().parents[1]
# The manual's vocabulary: the README and docs/ (what the README alone held before).
WORDS = sorted(set(re.findall(r"[a-z]{3,}", " ".join(
    page.read_text().lower() for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]))))


@dataclass
class Chat:
    system: str
    turns: list = field(default_factory=list)     # (question, answer) texts


@dataclass(frozen=True)
class Reopening:
    chat: int
    question: str
    answer: str


def text(rng: random.Random, words: int) -> str:
    """Made-up prose of about `words` words (sentences of the manual's vocabulary)."""
    out, left = [], words
    while left > 0:
        n = min(left, rng.randint(6, 18))
        sentence = " ".join(rng.choice(WORDS) for _ in range(n))
        out.append(sentence[0].upper() + sentence[1:] + ".")
        left -= n
    return " ".join(out)


def make_chats(rng: random.Random, n: int, low: int, high: int, count_tokens) -> list[Chat]:
    """`n` chats of `low` to `high` tokens each (count_tokens(text) counts a text's)."""
    chats = []
    for _ in range(n):
        target = rng.randint(low, high)
        chat = Chat(system=text(rng, rng.randint(8, 20)))
        total = count_tokens(chat.system) + 8
        while total < target - 20:
            left = max(40, (target - total) // 2)   # about tokens per word: the last turn fits
            question = text(rng, min(rng.randint(20, 80), left // 4))
            answer = text(rng, min(rng.randint(60, 240), left))
            chat.turns.append((question, answer))
            total += count_tokens(question) + count_tokens(answer) + 10
        chats.append(chat)
    return chats


def make_trace(rng: random.Random, n_chats: int, events: int, fits) -> list[Reopening]:
    """`events` reopenings; fits(reopening) says whether its chat can take it (the context),
    and counts it if so."""
    working = list(range(max(0, n_chats - WORKING), n_chats))   # the newest chats, oldest first
    trace, tries = [], 0
    while len(trace) < events and tries < 100 * events:   # until no chat can take more
        tries += 1
        old = [c for c in range(n_chats) if c not in working]
        r = rng.random()
        if r < P_WORKING or not old:
            ranked = list(reversed(working))        # the most recently used first
            chat = rng.choices(ranked, [1 / (i + 1) for i in range(len(ranked))])[0]
            working.remove(chat)
            working.append(chat)
        elif r < P_WORKING + P_ONE_OFF:
            chat = rng.choice(old)
        else:
            chat = rng.choice(old)
            working.pop(0)
            working.append(chat)
        reopening = Reopening(chat, text(rng, rng.randint(10, 30)), text(rng, rng.randint(25, 70)))
        if fits(reopening):
            trace.append(reopening)
    return trace


DROP_CONVERSATION = """
DELETE FROM kv_segments WHERE message_id IN (SELECT id FROM messages WHERE conversation_id = ?)"""
STORED_CONVERSATIONS = """
SELECT DISTINCT m.conversation_id FROM kv_segments k JOIN messages m ON m.id = k.message_id"""


class LRUByConversation:
    """Plain least-recently-used eviction by conversation, as the budget's baseline."""

    def __init__(self):
        self.last_used: dict[int, int] = {}   # conversation -> the event it was last used at
        self.clock = 0

    def used(self, conv_id: int) -> None:
        self.clock += 1
        self.last_used[conv_id] = self.clock

    def make_room(self, archive, needed: int, current: int) -> "tuple[int | None, int]":
        """Drop whole conversations, least recently used first, until `needed` bytes fit;
        (room left, conversations dropped)."""
        budget = archive.kv_budget.get().bytes
        dropped = 0
        while archive.kv_keeping.stored_bytes() + needed > budget:
            stored = {r[0] for r in archive.conn.execute(STORED_CONVERSATIONS)} - {current}
            if not stored:
                break
            victim = min(stored, key=lambda c: self.last_used.get(c, 0))
            archive.conn.execute(DROP_CONVERSATION, (victim,))
            dropped += 1
        return budget - archive.kv_keeping.stored_bytes(), dropped
