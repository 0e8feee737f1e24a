"""Console benchmark: start-up time to the prompt, and the console's cost per streamed token.

    python bench/console.py                 # 10,000 conversations, 6 rounds
    python bench/console.py --rounds 3 --conversations 2000

1. `chatdb -c` on an archive of N conversations, in a pseudo-terminal:
   seconds from starting the process to the prompt being drawn, model load
   included (the archive is built once and cached under bench/out/).
2. The same answer streamed to a terminal by `chatdb ask` and by the
   console, each in its own process, alternately: the time between the first
   and the last piece of the answer on the terminal, per token.
3. The same again with one engine in this process, streaming through the
   console's on_text and ask's in turn (engine-timed): what the console's
   per-token code costs, without process-to-process noise.
4. Each on_text alone, writing to a terminal: microseconds per piece.

On a shared 2-core machine other work moves decode speed by several percent
from one run to the next (and many times over under heavy load): read 2 with
its paired and min figures, and 3 and 4 for the console's own cost.
Prints a plain-text table.
"""

import argparse
import os
import pty
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from chatdb.archive import Archive  # noqa: E402

OUT = ROOT / "bench" / "out"
PROMPT = "› "
ANSWER_START = "\x1b[36m"
QUESTION = "Write a detailed essay about the history of the printing press."
LAUNCH = ("import fcntl, os, sys, termios; os.setsid(); fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
          "os.execv(sys.executable, [sys.executable, '-m', 'cli.main', *sys.argv[1:]])")
WORDS = ("lifetime borrow checker archive model token cache query index thread server client "
         "python rust sqlite kyoto river lake essay story answer question").split()


def build_archive(n: int) -> Path:
    """N conversations of 6 messages each (cached)."""
    path = OUT / f"console-{n}.db"
    if path.exists():
        return path
    OUT.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    with Archive.open(partial) as archive:
        for start in range(0, n, 1000):
            with archive.transaction():
                for i in range(start, min(n, start + 1000)):
                    conv = archive.create_conversation(f"conversation {i} about {WORDS[i % len(WORDS)]}")
                    for j in range(6):
                        text = " ".join(WORDS[(i + j + k) % len(WORDS)] for k in range(30))
                        archive.add_message(conv.id, ("user", "assistant")[j % 2], text)
    partial.rename(path)
    return path


class Terminal:
    """A process on a pty; what it writes is kept with the time each piece arrived."""

    def __init__(self, args, env):
        self.master, slave = pty.openpty()
        self.started = time.perf_counter()
        self.proc = subprocess.Popen([sys.executable, "-c", LAUNCH, *map(str, args)], cwd=ROOT,
                                     env=env, stdin=slave, stdout=slave, stderr=slave)
        os.close(slave)
        self.text, self.arrivals = "", []   # arrivals: (seconds, length of text after it)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:
                return
            if not data:
                return
            self.text += data.decode(errors="replace")
            self.arrivals.append((time.perf_counter() - self.started, len(self.text)))

    def wait_for(self, pattern: str, after: int = 0, timeout: float = 600) -> float:
        """Seconds from the start until `pattern` showed (after offset `after`)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = re.compile(pattern).search(self.text, after)
            if found:
                self.end = found.end()
                return self.time_of(found.end() - 1)
            time.sleep(0.002)
        raise RuntimeError(f"{pattern!r} did not show: {self.text[-500:]!r}")

    def time_of(self, offset: int) -> float:
        return next(t for t, length in self.arrivals if length > offset)

    def finish(self, keys: str = "") -> None:
        if keys:
            os.write(self.master, keys.encode())
        self.proc.wait(timeout=600)
        self.reader.join(timeout=5)
        os.close(self.master)


def environment(tmp: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "CHATDB_DB")}
    return {**env, "TERM": "xterm-256color", "PROMPT_TOOLKIT_NO_CPR": "1",
            "XDG_STATE_HOME": str(tmp / "state"), "PYTHONPATH": str(ROOT)}


def time_to_prompt(db: Path, env: dict) -> float:
    term = Terminal(["-c", "--db", db], env)
    seconds = term.wait_for(re.escape(PROMPT))
    term.finish("\x04")
    return seconds


def streamed(term: Terminal, start: int, answer: str) -> float:
    """Seconds between the first and the last piece of `answer` on the terminal at `start`."""
    shown = answer.replace("\n", "\r\n")  # the terminal's ONLCR
    begin = term.text.index(shown, start)
    end = begin + len(shown) - 1
    return term.time_of(end) - term.time_of(begin)


def ask_run(db: Path, env: dict, max_tokens: int) -> tuple[str, float]:
    term = Terminal(["ask", "--db", db, "--temperature", "0", "--max-tokens", max_tokens, QUESTION], env)
    term.finish()
    answer = last_answer(db)
    return answer, streamed(term, 0, answer)


def console_run(db: Path, env: dict, max_tokens: int) -> tuple[str, float, int]:
    term = Terminal(["--db", db, "--temperature", "0", "--max-tokens", max_tokens], env)
    term.wait_for(re.escape(PROMPT))
    os.write(term.master, (QUESTION + "\r").encode())
    term.wait_for(r"(\d+) tokens · ")
    tokens = int(re.search(r"(\d+) tokens · ", term.text).group(1))
    start = term.text.index(ANSWER_START) + len(ANSWER_START)
    term.wait_for(re.escape(PROMPT), after=term.end)  # the next prompt: Ctrl-D there quits
    term.finish("\x04")
    answer = last_answer(db)
    return answer, streamed(term, start, answer), tokens


def terminal_stdout():
    """A text stream onto a pty whose other end is drained: writes cost what they do on a terminal."""
    master, slave = pty.openpty()
    threading.Thread(target=_drain, args=(master,), daemon=True).start()
    return os.fdopen(slave, "w", encoding="utf-8")


def on_texts(out):
    """(console's on_text, ask's on_text), both writing to `out`."""
    from cli.commands import ask
    from cli.console.screen.render import Renderer, Waiting
    from cli.console.screen.answer_stream import AnswerStream

    render = Renderer(out=out, err=out, color=True)
    console_stream = AnswerStream(render, Waiting(render, ""))
    console_stream.started = True
    return console_stream, ask._stream  # ask's writes to sys.stdout: the caller points it at `out`


def on_text_cost(pieces: int = 20_000) -> tuple[float, float]:
    """(console, ask): microseconds per streamed piece spent in each one's on_text."""
    out = terminal_stdout()
    words = [" printing", " press", ",", " Guten", "berg", "\n"] * (pieces // 6)
    saved, sys.stdout = sys.stdout, out
    try:
        costs = []
        for fn in on_texts(out):
            started = time.perf_counter()
            for word in words:
                fn(word)
            costs.append((time.perf_counter() - started) / len(words) * 1e6)
    finally:
        sys.stdout = saved
        out.close()
    return costs[0], costs[1]


def same_engine(rounds: int, max_tokens: int, tmp: Path) -> tuple[list, list]:
    """(console ms, ask ms) per token: one engine, answers streamed by either on_text in turn."""
    from engine.chat import Engine
    from engine.llama.sampling import SamplingSettings

    out = terminal_stdout()
    console_stream, ask_stream = on_texts(out)
    saved, sys.stdout = sys.stdout, out
    times = {console_stream: [], ask_stream: []}
    with Archive.open(tmp / "same-engine.db") as archive:
        engine = Engine.open(archive, sampling=SamplingSettings(temperature=0, max_tokens=max_tokens))
        try:
            for n in range(rounds):
                for fn in (console_stream, ask_stream)[:: 1 if n % 2 else -1]:
                    conv = archive.create_conversation("bench")
                    result = engine.reply(conv.id, QUESTION, on_text=fn)
                    times[fn].append(1000 / result.decode_tokens_per_s)
        finally:
            engine.close()
            sys.stdout = saved
            out.close()
    return times[console_stream], times[ask_stream]


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 65536):
            pass
    except OSError:
        pass


def last_answer(db: Path) -> str:
    with Archive.open(db) as archive:
        return archive.messages(archive.latest_conversation().id)[-1].content


def row(name: str, values: list[float], unit: str, scale: float = 1.0) -> str:
    v = [x * scale for x in values]
    return f"| {name} | {statistics.median(v):.3f} {unit} | {min(v):.3f} {unit} | {max(v):.3f} {unit} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--conversations", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--max-tokens", type=int, default=256)
    args = parser.parse_args()

    load_before = os.getloadavg()[0]
    big = build_archive(args.conversations)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = environment(tmp)
        db = tmp / "stream.db"
        empty = tmp / "empty.db"
        Archive.open(empty).close()
        time_to_prompt(big, env)  # warm the page cache
        startup = [time_to_prompt(big, env) for _ in range(args.rounds)]
        startup_empty = [time_to_prompt(empty, env) for _ in range(args.rounds)]

        ask_ms, console_ms = [], []
        for n in range(args.rounds):  # who goes first alternates: load and warmth hit both alike
            if n % 2 == 0:
                ask_text, ask_s = ask_run(db, env, args.max_tokens)
                text, console_s, tokens = console_run(db, env, args.max_tokens)
            else:
                text, console_s, tokens = console_run(db, env, args.max_tokens)
                ask_text, ask_s = ask_run(db, env, args.max_tokens)
            if text != ask_text:
                raise RuntimeError("ask and the console gave different answers")
            ask_ms.append(ask_s * 1000 / (tokens - 1))
            console_ms.append(console_s * 1000 / (tokens - 1))

        same_console, same_ask = same_engine(args.rounds, args.max_tokens, tmp)

    overhead = [(c - a) / a * 100 for a, c in zip(ask_ms, console_ms)]
    same_overhead = [(c - a) / a * 100 for a, c in zip(same_ask, same_console)]
    console_us, ask_us = on_text_cost()
    per_token_us = statistics.median(ask_ms) * 1000
    print(f"chatdb console benchmark · {os.cpu_count()} CPUs · {args.rounds} rounds · load average "
          f"{load_before:.2f} before, {os.getloadavg()[0]:.2f} after (other work on the machine "
          f"slows decoding many times over: compare the min column then)\n")
    print("| what | median | min | max |")
    print("| --- | --- | --- | --- |")
    print(row(f"`chatdb -c` to prompt, {args.conversations:,} conversations", startup, "s"))
    print(row("`chatdb -c` to prompt, empty archive", startup_empty, "s"))
    print(row(f"`chatdb ask`: ms per streamed token ({tokens} tokens)", ask_ms, "ms"))
    print(row("console: ms per streamed token", console_ms, "ms"))
    print(row("console overhead per token (paired rounds)", overhead, "%"))
    print(row("one engine in one process: ask's on_text, ms per token", same_ask, "ms"))
    print(row("one engine in one process: console's on_text, ms per token", same_console, "ms"))
    print(row("console overhead per token, one engine (paired rounds)", same_overhead, "%"))
    print(f"\nmedian of the overall per-token times: console "
          f"{(statistics.median(console_ms) / statistics.median(ask_ms) - 1) * 100:+.2f}% against ask")
    print(f"on_text alone, writing to a terminal: console {console_us:.2f} µs per piece, ask "
          f"{ask_us:.2f} µs; the difference is {(console_us - ask_us) / per_token_us * 100:+.4f}% "
          f"of a token's {per_token_us / 1000:.1f} ms")


if __name__ == "__main__":
    main()
