"""The tasks bench/speculative.py (and its --archive part, and bench/serve_drafting.py) time:
a file to edit, a passage to quote, a story to write."""

CODE = '''import json
import os
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Settings:
    name: str
    path: Path
    retries: int = 3
    timeout: float = 10.0
    tags: list = field(default_factory=list)


def load_config(path):
    """Read settings from a JSON file."""
    with open(path) as handle:
        data = json.load(handle)
    return Settings(
        name=data["name"],
        path=Path(data["path"]),
        retries=data.get("retries", 3),
        timeout=data.get("timeout", 10.0),
        tags=data.get("tags", []),
    )


def save_config(settings, path):
    """Write settings to a JSON file."""
    data = {
        "name": settings.name,
        "path": str(settings.path),
        "retries": settings.retries,
        "timeout": settings.timeout,
        "tags": settings.tags,
    }
    with open(path, "w") as handle:
        json.dump(data, handle, indent=2)


def find_configs(folder):
    """All JSON files in a folder."""
    found = []
    for name in sorted(os.listdir(folder)):
        if name.endswith(".json"):
            found.append(Path(folder) / name)
    return found


def main():
    for path in find_configs("."):
        settings = load_config(path)
        print(settings.name, settings.retries)


if __name__ == "__main__":
    main()
'''

PASSAGE = """The lighthouse stood on a rock a mile from the shore, and for forty years the same family kept its lamp. Every evening the keeper climbed the one hundred and twelve steps, trimmed the wick, wound the clockwork that turned the lens, and wrote the weather in a book bound in green cloth.

In the winter of the great storm the supply boat could not reach the rock for six weeks. The keeper and his daughter lived on salted fish and tea, and burned the last of the oil on the night the storm was worst, because a ship had been seen to the south, fighting the wind.

When the weather cleared, the ship was found safe in the bay, its captain swearing that the light had never once gone dark. The keeper said nothing of the oil. He only wrote in the green book that the wind had been from the north-east, and strong."""

TASKS = {
    "editing": [("user", f"Here is a Python file:\n\n```python\n{CODE}```\n\n"
                         "Rename the function load_config to read_config everywhere and show "
                         "the whole file.")],
    "quotation": [("user", f"Please keep this text for later:\n\n{PASSAGE}"),
                  ("assistant", "I have kept the text. What would you like to do with it?"),
                  ("user", "Quote the second and third paragraphs exactly, word for word.")],
    "prose": [("user", "Write a short story about a fox who learns to read.")],
}
