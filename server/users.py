"""Who may call the server: one key, or the keys of the people who share it (serve --keys FILE).

A keys file holds a user a line, `NAME KEY [admin] [concurrent=N] [tpm=N]`
(`#` starts a comment). KEY is the key itself or its SHA-256 as
`sha256:HEX`, which is what `chatdb serve --user-key NAME` writes: then the
file holds nothing anyone could call the server with. `admin` may read
/stats; `concurrent` and `tpm` are that key's own limits on requests at once
and tokens a minute (over the server's --max-concurrent and
--tokens-per-minute).

A presented key is hashed and compared with every user's hash in constant
time (hmac.compare_digest, each compared), so neither a key's bytes nor
which user it is can be told from response times.
"""

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from pathlib import Path

from chatdb.errors import ChatdbError

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")
HASHED = re.compile(r"^sha256:([0-9a-fA-F]{64})$")
LIMIT = re.compile(r"^(concurrent|tpm)=([1-9][0-9]*)$")


class KeysFileError(ChatdbError):
    """A keys file that cannot be used: its line and what is wrong with it."""


@dataclass(frozen=True)
class User:
    name: "str | None"                  # None: the archive's own user (a single key, or none)
    admin: bool = False
    concurrent: "int | None" = None     # requests at once (None: the server's limit)
    tokens_per_minute: "int | None" = None

    @property
    def label(self) -> str:
        return self.name or "(owner)"


SOLE = User(None, admin=True)   # a single-user server's caller


def digest(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


class Keys:
    """The users and their keys' hashes; `user(header)` says who an Authorization is."""

    def __init__(self, users: "list[tuple[bytes, User]]", open_: bool = False):
        self.users, self.open = users, open_

    @classmethod
    def single(cls, api_key: "str | None") -> "Keys":
        """$CHATDB_API_KEY's form: one key (or none, open) for the archive's own user."""
        return cls([(digest(api_key), SOLE)] if api_key else [], open_=not api_key)

    @classmethod
    def load(cls, path: Path) -> "Keys":
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise KeysFileError(f"{path}: cannot read the keys file ({exc})") from None
        users, names = [], set()
        for number, line in enumerate(text.splitlines(), 1):
            words = line.split("#", 1)[0].split()
            if not words:
                continue
            entry = _entry(words, f"{path}:{number}")
            if entry[1].name in names:
                raise KeysFileError(f"{path}:{number}: user {entry[1].name!r} is named twice")
            names.add(entry[1].name)
            users.append(entry)
        if not users:
            raise KeysFileError(f"{path}: the keys file names no user ('NAME KEY' a line)")
        return cls(users)

    @property
    def several(self) -> bool:
        return any(user.name is not None for _, user in self.users)

    def user(self, authorization: bytes) -> "User | None":
        """The user whose key `Authorization: Bearer KEY` carries, or None."""
        if self.open:
            return SOLE
        scheme, _, key = authorization.partition(b" ")
        presented = hashlib.sha256(key.strip()).digest()
        found = None
        for hashed, user in self.users:   # every one compared: the time says nothing
            if hmac.compare_digest(presented, hashed) and scheme.lower() == b"bearer":
                found = user
        return found


def _entry(words: list[str], where: str) -> "tuple[bytes, User]":
    if len(words) < 2:
        raise KeysFileError(f"{where}: expected 'NAME KEY [admin] [concurrent=N] [tpm=N]'")
    name, key, options = words[0], words[1], words[2:]
    if not NAME.match(name):
        raise KeysFileError(f"{where}: {name!r} is not a user name (letters, digits, . _ @ -)")
    hashed = HASHED.match(key)
    admin, limits = False, {}
    for option in options:
        if option == "admin":
            admin = True
        elif match := LIMIT.match(option):
            limits[match[1]] = int(match[2])
        else:
            raise KeysFileError(f"{where}: {option!r} is not admin, concurrent=N or tpm=N")
    user = User(name, admin, limits.get("concurrent"), limits.get("tpm"))
    return (bytes.fromhex(hashed[1]) if hashed else digest(key)), user


def add_user(path: Path, name: str) -> str:
    """A new key for `name`, its hash appended to the keys file; the key (shown once)."""
    if not NAME.match(name):
        raise KeysFileError(f"{name!r} is not a user name (letters, digits, . _ @ -)")
    if path.exists() and any(u.name == name for _, u in Keys.load(path).users):
        raise KeysFileError(f"{path}: user {name!r} has a key already")
    key = "cdb-" + secrets.token_urlsafe(32)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as out:
        if out.tell() and not path.read_bytes().endswith(b"\n"):
            out.write("\n")
        out.write(f"{name} sha256:{digest(key).hex()}\n")
    path.chmod(0o600)
    return key
