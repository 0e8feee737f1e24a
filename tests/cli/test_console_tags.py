"""/tag, /untag, /tags, /pin, /archive and /list's pins and tags in the console, with completion;
on the real model and a real archive (the console's stdin mode, as at the prompt)."""

from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document

from cli.console.completion import ConsoleCompleter
from engine.llama.sampling import SamplingSettings

from .test_console_commands import Console, new

GREEDY = SamplingSettings(temperature=0, max_tokens=4, seed=1)


def console_of(shared_model):
    return Console(shared_model.session(), shared_model.archive.db_path)


def completions(session, text: str) -> list[str]:
    return [c.text for c in ConsoleCompleter(session).get_completions(Document(text), CompleteEvent(True))]


def test_tag_untag_and_tags(shared_model):
    console = console_of(shared_model)
    assert "not saved yet" in console.error("/new\n/tag early\n")
    conv = new(console, "Tag me please")
    _, err = console.ok('/tag Rust "machine learning"\n')
    assert '#"machine learning" #Rust' in err
    assert shared_model.archive.tags.of(conv) == ["machine learning", "Rust"]
    out, _ = console.ok("/tags\n")
    assert '* ' in out and '#"machine learning"' in out
    _, err = console.ok("/untag RUST\n")
    assert shared_model.archive.tags.of(conv) == ["machine learning"]
    assert "control character" in console.error("/tag \"bad\x07tag\"\n")
    assert "at most 100 characters" in console.error("/tag " + "x" * 10_000 + "\n")
    assert "cannot read the tags" in console.error('/tag "open\n')
    assert shared_model.archive.tags.of(conv) == ["machine learning"]


def test_pin_and_archive_show_in_list(shared_model):
    console = console_of(shared_model)
    pinned = new(console, "Pin this one", title="Pinned chat")
    console.ok("/tag keep\n/pin\n")
    archived = new(console, "Archive this one", title="Old chat")
    new(console, "Newest one", title="Newest chat")
    console.ok(f"/archive #{archived}\n")
    out, _ = console.ok("/list\n")
    lines = out.splitlines()
    assert "pinned Pinned chat" in lines[0] and "#keep" in lines[0]
    assert "Old chat" not in out
    console.ok(f"/unarchive #{archived}\n/unpin #{pinned}\n")
    out, _ = console.ok("/list\n")
    assert "Old chat" in out and "pinned" not in out.splitlines()[0]
    console.ok(f"/archive #{archived}\n/switch Old chat\n")     # a title still finds it
    assert console.session.conv_id == archived


def test_tab_completes_tags(shared_model):
    console = console_of(shared_model)
    conv = new(console, "Completing tags")
    shared_model.archive.tags.add(conv, ["zeta one", "zebra"])
    session = console.session
    assert set(completions(session, "/tag ze")) == {'"zeta one"', "zebra"}
    assert completions(session, '/tag zebra "zeta') == ['"zeta one"']
    assert completions(session, "/untag zeb") == ["zebra"]
    new(console, "Another")
    assert completions(session, "/untag zeb") == []      # this conversation has none
    assert "/tags" in completions(session, "/ta")
