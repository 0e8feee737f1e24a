"""The manual keeps up with the program: every command and flag of `chatdb --help` (and of each
subcommand's), every slash command and every server field is documented in docs/, and every
relative link in docs/ and the README leads to a page and a heading that are there."""

import argparse
import re
from pathlib import Path

import pytest

from cli.main import build_parser

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md"] + sorted(DOCS.glob("*.md"))
# Pages that other issues write, linked before they land: allowed to be missing, and only these.
COMING = {"gpu.md", "organising.md", "privacy.md", "archive-drafting.md", "shared-server.md",
          "properties-and-fuzzing.md"}
# Documented once for every command (docs/archive-cli.md#which-archive, and --key-file in
# docs/privacy.md#where-the-key-comes-from), and argparse's own.
EVERYWHERE = {"--db", "--key-file", "--help"}

HEADING = re.compile(r"^(#{1,6}) +(.*)$")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def prose(text: str) -> str:
    """Markdown without its fenced code blocks (a `[x](y)` there is code, not a link)."""
    return FENCE.sub("", text)


def sections(path: Path) -> "list[tuple[str, str]]":
    """(heading, text) of every heading of a page, the text running to the next heading of
    the same or a higher level (so a section holds its subsections)."""
    lines, found = path.read_text("utf-8").split("\n"), []
    heads = [(i, len(m[1]), m[2]) for i, line in enumerate(lines) if (m := HEADING.match(line))]
    for k, (start, level, title) in enumerate(heads):
        end = next((i for i, lv, _ in heads[k + 1:] if lv <= level), len(lines))
        found.append((title, "\n".join(lines[start:end])))
    return found


def commands(parser=None, path=()):
    """(command words, parser) of `chatdb` and of every subcommand, at every depth."""
    parser = parser or build_parser()
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, path + (name,))


def flags(parser) -> "list[str]":
    """Each option's name as the docs write it: the long form, else the short."""
    names = []
    for action in parser._actions:
        if action.option_strings:
            longs = [o for o in action.option_strings if o.startswith("--")]
            names.append((longs or action.option_strings)[0])
    return names


def names_command(heading: str, words: tuple) -> bool:
    """Whether a heading is about the command: `chatdb ask`, or `ask` among its words."""
    phrase = " ".join(words)
    heading = heading.lower()
    return f"chatdb {phrase}" in heading or (
        len(words) == 1 and words[0] in re.findall(r"[a-z_-]+", heading.replace("`", " ")))


def contexts(words: tuple) -> "list[str]":
    """The text of every section about a command (a bare `chatdb` is the console's `chat`);
    a subcommand (`kv budget`) is also documented in its command's sections."""
    words = words or ("chat",)
    found = [text for page in PAGES for heading, text in sections(page)
             if names_command(heading, words)]
    return found + (contexts(words[:-1]) if len(words) > 1 else [])


ALL_COMMANDS = [(words, parser) for words, parser in commands()]


def undocumented(words: tuple, parser) -> "list[str]":
    """The flags of a command that no section about it mentions."""
    where = contexts(words)
    assert where, f"no heading in docs/ names `chatdb {' '.join(words)}`"
    return [flag for flag in flags(parser) if flag not in EVERYWHERE
            and not any(re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text) for text in where)]


@pytest.mark.parametrize("words,parser", ALL_COMMANDS,
                         ids=[" ".join(("chatdb",) + w) for w, _ in ALL_COMMANDS])
def test_every_flag_of_every_command_is_in_the_docs(words, parser):
    missing = undocumented(words, parser)
    assert not missing, (f"`chatdb {' '.join(words)}`: {missing} are in its --help but in no "
                         "section of docs/ about it")


def test_the_flags_documented_once_are_documented():
    text = "\n".join(page.read_text("utf-8") for page in PAGES)
    assert all(flag in text for flag in EVERYWHERE - {"--help"})


def test_a_flag_missing_from_the_docs_fails_the_check():
    """The check can fail: a flag that no page mentions is found (on a parser of its own)."""
    words, parser = next((w, p) for w, p in commands(build_parser()) if w == ("list",))
    parser.add_argument("--no-such-flag-documented")
    assert undocumented(words, parser) == ["--no-such-flag-documented"]


def test_every_slash_command_is_in_the_console_page():
    from cli.console.slash import table

    page = (DOCS / "console.md").read_text("utf-8")
    names = set(table.by_name())          # every name and alias
    missing = sorted(n for n in names if not re.search(rf"`/{re.escape(n)}\b", page))
    assert not missing, f"slash commands missing from docs/console.md: {missing}"


def test_every_server_endpoint_and_field_is_in_the_server_page():
    from engine.llama.sampling import SamplingSettings
    from server import chat_request, completion_request, fields
    from server.app import ServerConfig, build_app

    page = (DOCS / "server.md").read_text("utf-8")
    guarded = build_app(None, ServerConfig(model_name="test", sampling=SamplingSettings()))
    paths = {re.sub(r"\{\w+(:\w+)?\}", "NAME", route.path) for route in guarded.app.routes}
    written = lambda path: re.search(rf"(?<![\w/]){re.escape(path)}(?![\w/])", page)  # noqa: E731
    missing = sorted(p for p in paths if not p.startswith("/v1/") and not written("/v1" + p)
                     and not written(p))
    assert not missing, f"endpoints missing from docs/server.md: {missing}"
    names = (chat_request.HONOURED | set(chat_request.REFUSED) | fields.NO_OPS
             | completion_request.HONOURED | {"input", "encoding_format", "dimensions"})
    missing = sorted(n for n in names if f"`{n}`" not in page and f"`{n}:" not in page)
    assert not missing, f"request fields missing from docs/server.md: {missing}"


def slugs(path: Path) -> set:
    """The anchors of a page's headings, as GitHub writes them."""
    found = set()
    for heading, _ in sections(path):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(slug)
    return found


def links():
    for page in PAGES:
        for target in LINK.findall(prose(page.read_text("utf-8"))):
            if not re.match(r"^[a-z]+:", target):   # http:, https:, mailto: are not ours
                yield page, target


@pytest.mark.parametrize("page,target", list(links()),
                         ids=[f"{p.relative_to(ROOT)}->{t}" for p, t in links()])
def test_every_relative_link_resolves(page, target):
    file_part, _, anchor = target.partition("#")
    path = (page.parent / file_part).resolve() if file_part else page
    if not path.exists():
        assert path.parent == DOCS and path.name in COMING, \
            f"{page.relative_to(ROOT)}: {target} leads nowhere"
        return
    if anchor:
        assert anchor in slugs(path), f"{page.relative_to(ROOT)}: no heading #{anchor} in {path.name}"


def test_only_the_coming_pages_may_be_missing():
    """A link to a page not yet written is allowed only for the pages other issues write."""
    missing = {(page.parent / t.partition("#")[0]).resolve() for page, t in links()
               if t.partition("#")[0] and not (page.parent / t.partition("#")[0]).exists()}
    assert {p.name for p in missing} <= COMING
    assert all(p.parent == DOCS for p in missing)
