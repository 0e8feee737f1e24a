"""Tags as a person reads them, in `chatdb list`, `chatdb tag` and the console: #rust #"machine learning"."""

from . import output


def tag_list(tags) -> str:
    return " ".join(f'#"{t}"' if " " in t else f"#{t}" for t in map(output.one_line, tags))
