"""The console's output pieces: the figures line, session totals, colour, progress."""

import io
import re

from cli.console.screen.render import CLEAR_LINE, Renderer, Waiting
from cli.console.screen.answer_stream import AnswerStream
from cli.console.screen.stats import SessionStats, percentile, turn_line
from engine.chat import TurnResult

from ..polling import wait_until


def result(**changes) -> TurnResult:
    fields = dict(conversation_id=1, user_message_id=2, message_id=3, text="Hi", status="complete",
                  finish="stop", prompt_tokens=4000, completion_tokens=42, restored_tokens=3912,
                  kv_source="archive", computed_tokens=88, restore_ms=84.4, ttft_ms=180.2,
                  decode_tokens_per_s=61.34, total_ms=900.0)
    return TurnResult(**{**fields, **changes})


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def wait_for(stream: io.StringIO, text: str) -> None:
    wait_until(lambda: text in stream.getvalue(), what=f"{text!r} to be written")


def test_the_line_after_an_answer_says_how_the_context_was_obtained():
    assert turn_line(result()) == ("42 tokens · 61.3 tokens/s · first token 180 ms · resumed "
                                   "3,912 tokens from the archive in 84 ms, read 88 new")
    assert "from the archive in 84 ms while you typed, read 88 new" in turn_line(
        result(restored_ahead=True))
    assert "restored 3,912 tokens from memory in 1.2 s" in turn_line(
        result(kv_source="memory", restore_ms=1234))
    assert "reused 3,912 tokens already in memory, read 88 new" in turn_line(result(kv_source="live"))
    assert turn_line(result(kv_source="none", restored_tokens=0, computed_tokens=4000)).endswith(
        "read 4,000 tokens")
    assert "interrupted: the partial answer is kept" in turn_line(
        result(status="interrupted", finish="cancelled"))
    assert "stopped at max_tokens" in turn_line(result(finish="length"))
    assert "window: messages 3-40 of 40 (2 oldest left out" in turn_line(
        result(left_out_messages=2, path_messages=40))
    assert "window" not in turn_line(result(path_messages=40))


def test_session_totals():
    stats = SessionStats()
    for ttft in (100, 200, 300, 400, 1000):
        stats.add(result(ttft_ms=ttft, completion_tokens=11, decode_tokens_per_s=10.0))
    stats.add(result(kv_source="memory", restored_tokens=500, restore_ms=30))
    rows = dict(stats.rows())
    assert rows["answers"] == "6"
    assert rows["tokens generated"] == f"{5 * 11 + 42:,}"
    assert rows["first token"] == "median 250 ms, p95 1.0 s"
    assert rows["KV restored from archive"].startswith("5 × 19,560 tokens")
    assert rows["KV restored from memory"].startswith("1 × 500 tokens")
    assert rows["context reused in place"] == "none"
    assert float(rows["tokens/s"]) == round((50 + 41) / (5 + 41 / 61.34), 1)
    assert percentile([5, 1, 3], 0.5) == 3


def test_answers_are_coloured_only_when_asked():
    out = io.StringIO()
    r = Renderer(out=out, err=io.StringIO(), color=True)
    r.begin_answer(), r.stream("a\x1b[2Jb\tc\n"), r.end_answer(interrupted=True)
    assert out.getvalue() == "\x1b[36ma[2Jb\tc\n\x1b[0m \x1b[33m[interrupted]\x1b[0m\n"
    plain = io.StringIO()
    r = Renderer(out=plain, err=io.StringIO(), color=False)
    r.begin_answer(), r.stream("text"), r.end_answer(interrupted=False)
    assert plain.getvalue() == "text\n"


def test_progress_shows_only_after_a_second_and_is_erased():
    err = Terminal()
    r = Renderer(out=io.StringIO(), err=err, color=False)
    with Waiting(r, "loading", delay=0.05) as waiting:
        waiting.update("reading 512 of 4,000 tokens")
        wait_for(err, "loading: reading 512 of 4,000 tokens")
    shown = err.getvalue()
    assert re.search(r"loading: reading 512 of 4,000 tokens \(\d+\.\d s\)", shown)
    assert shown.endswith(CLEAR_LINE)
    quick = Terminal()
    with Waiting(Renderer(out=io.StringIO(), err=quick, color=False), "loading"):
        pass
    assert quick.getvalue() == ""


def test_the_first_piece_of_an_answer_ends_the_progress_line():
    err, out = Terminal(), io.StringIO()
    r = Renderer(out=out, err=err, color=False)
    stream = AnswerStream(r, Waiting(r, "thinking", delay=0.01).start())
    stream.progress(100, 200)
    wait_for(err, "thinking: reading 100 of 200 tokens")
    stream("Hel"), stream("lo")
    stream.finish(interrupted=False)
    assert "thinking: reading 100 of 200 tokens" in err.getvalue()
    assert err.getvalue().endswith(CLEAR_LINE) and out.getvalue() == "Hello\n"
