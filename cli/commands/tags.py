"""`chatdb tag|untag CONV TAG...`, `chatdb pin|unpin|archive|unarchive CONV`, `chatdb tags`."""

from chatdb.tags import TagError

from .. import output, refs
from ..tag_text import tag_list
from ..options import add_command, open_archive

TAGS_ARE = """\
Tags match without regard to case: "Rust" and "rust" are one tag, shown as
first written. A tag is at most 100 characters of text, with no control
characters.

JSON: {id, title, tags, pinned, archived}"""
DESCRIPTIONS = {
    "tag": 'Give a conversation tags (any number; quote a tag with spaces: "machine\n'
           'learning"). A tag it has already is kept once.\n\n' + TAGS_ARE,
    "untag": "Take tags off a conversation (any number; one it does not carry changes\n"
             "nothing). A tag no conversation carries any more is gone from `chatdb tags`.\n\n"
             + TAGS_ARE,
}

FLAGS = {  # command: (flag, value, what it says, help)
    "pin": ("pinned", True, "pinned", "pin a conversation: pinned ones come first in `list`"),
    "unpin": ("pinned", False, "unpinned", "unpin a conversation"),
    "archive": ("archived", True, "archived",
                "archive a conversation: `list` leaves it out unless given --archived"),
    "unarchive": ("archived", False, "unarchived", "bring an archived conversation back to `list`"),
}


def register(subparsers) -> None:
    for name, run, help in (("tag", run_tag, "give a conversation tags"),
                            ("untag", run_untag, "take tags off a conversation")):
        parser = add_command(subparsers, name, run, help=help, description=DESCRIPTIONS[name])
        parser.add_argument("conv", metavar="CONV", help="conversation number or uid")
        parser.add_argument("tags", metavar="TAG", nargs="+")
    for name, (_, _, _, help) in FLAGS.items():
        parser = add_command(subparsers, name, run_flag, help=help,
                             description=f"{help[0].upper()}{help[1:]}.\n\n"
                                         "JSON: {id, title, tags, pinned, archived}")
        parser.add_argument("conv", metavar="CONV", help="conversation number or uid")
        parser.set_defaults(flag_command=name)
    add_command(subparsers, "tags", run_tags, help="every tag, with how many conversations carry it",
                description="Every tag, most used first, with how many conversations carry it.\n\n"
                            "JSON: [{tag, conversations}, ...]")


def run_tag(args) -> int:
    return _change_tags(args, lambda archive, conv_id: archive.tags.add(conv_id, args.tags))


def run_untag(args) -> int:
    return _change_tags(args, lambda archive, conv_id: archive.tags.remove(conv_id, args.tags))


def _change_tags(args, change) -> int:
    with open_archive(args) as archive:
        conv = refs.conversation(archive, args.conv)
        try:
            tags = change(archive, conv.id)
        except TagError as exc:   # bad input: nothing was changed
            output.error(str(exc))
            return 2
        _report(args, archive, conv, f"tags of conversation {conv.id}: "
                                     f"{tag_list(tags) if tags else '(none)'}")
    return 0


def run_flag(args) -> int:
    flag, value, said, _ = FLAGS[args.flag_command]
    with open_archive(args) as archive:
        conv = refs.conversation(archive, args.conv)
        archive.tags.set_flag(conv.id, flag, value)
        _report(args, archive, conv, f"{said} conversation {conv.id}")
    return 0


def run_tags(args) -> int:
    with open_archive(args) as archive:
        counts = archive.tags.counts()
    if args.json:
        output.print_json([{"tag": tag, "conversations": n} for tag, n in counts])
        return 0
    if not counts:
        output.print_text("no tags (chatdb tag CONV TAG gives one)")
    width = max((len(f"{n:,}") for _, n in counts), default=1)
    for tag, n in counts:
        output.print_text(f"{n:>{width},}  {output.one_line(tag)}")
    return 0


def _report(args, archive, conv, text: str) -> None:
    if args.json:
        output.print_json({"id": conv.id, "title": conv.title, "tags": archive.tags.of(conv.id),
                           **archive.tags.flags(conv.id)})
    else:
        output.print_text(text)

