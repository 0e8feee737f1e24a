"""Encryption at rest with SQLCipher 4: which files are encrypted, and the key a process uses.

An encrypted archive is a whole SQLCipher 4 file (every page, the WAL's too): its
first 16 bytes are the salt, the rest is ciphertext, where a plain SQLite file
begins with "SQLite format 3". SQLCipher stretches a passphrase with PBKDF2
(HMAC-SHA512, 256,000 rounds) on every connection, some 0.15 s; chatdb opens
several (the KV writer, the embedder, the server's), so it derives the page key
once a process with the same function and parameters (hashlib's) and hands
SQLCipher the raw key.

SQLCipher keeps none of its settings in the file: they are given again at every
open. Pages are 32 KiB, as in a plain archive. Each page is authenticated with
HMAC-SHA256 rather than SQLCipher 4's default SHA-512: as strong a MAC, and the
CPU's SHA instructions make reading pages 2.4x faster (KV state is megabytes).
A decrypted page costs a decryption to read again, where a plain one comes from
the OS's cache: encrypted connections keep up to 64 MiB of pages decrypted (a
search's index pages stay warm), against SQLite's 2 MiB.

The passphrase comes from $CHATDB_KEY, or from what a front-end read (a key file,
a prompt) and gave `use()`. It is never put in SQL, a message or the archive:
what SQLCipher sees is the derived key, in hex.
"""

import functools
import hashlib
import os
from pathlib import Path

from ..errors import BadInput

PLAIN_MAGIC = b"SQLite format 3\x00"
SALT_BYTES = 16
KDF_HASH, KDF_ROUNDS, KEY_BYTES = "sha512", 256_000, 32   # SQLCipher 4's defaults
CIPHER_PAGE_SIZE = 32768
# Per open, of main or an attached file (after its key, before its first read).
SETTINGS = (f"cipher_page_size = {CIPHER_PAGE_SIZE}", "cipher_hmac_algorithm = HMAC_SHA256")
CACHE_KIB = 65536
ENV = "CHATDB_KEY"


class Key:
    """A passphrase, and the page key derived from it for each salt (each file) it opened."""

    def __init__(self, passphrase: "str | bytes"):
        if isinstance(passphrase, str):
            passphrase = passphrase.encode("utf-8")
        if not passphrase:
            raise BadInput("an empty key: give a passphrase")
        self._passphrase = passphrase
        self._derived: dict[bytes, str] = {}

    def __repr__(self) -> str:
        return "Key(...)"

    def pragmas(self, salt: "bytes | None") -> "tuple[str, ...]":
        """What opens a file with this key: one whose salt is `salt`, or (None) a new one."""
        return (f"PRAGMA key = \"{self.raw(salt)}\"", *(f"PRAGMA {s}" for s in SETTINGS),
                f"PRAGMA cache_size = -{CACHE_KIB}")

    def raw(self, salt: "bytes | None") -> str:
        """SQLCipher's raw key for the file with `salt`; for a new file (None), with a new salt."""
        if salt is not None:
            return f"x'{self._derive(salt)}'"
        salt = os.urandom(SALT_BYTES)   # given with the key, SQLCipher writes it into the file
        return f"x'{self._derive(salt)}{salt.hex()}'"

    def _derive(self, salt: bytes) -> str:
        if salt not in self._derived:
            self._derived[salt] = hashlib.pbkdf2_hmac(KDF_HASH, self._passphrase, salt, KDF_ROUNDS,
                                                      KEY_BYTES).hex()
        return self._derived[salt]


_chosen: "list[Key | None]" = [None]   # what a front-end gave use(); else $CHATDB_KEY


def use(key: "Key | None") -> None:
    """The key this process opens encrypted archives with (None: back to $CHATDB_KEY)."""
    _chosen[0] = key


def current() -> "Key | None":
    if _chosen[0] is not None:
        return _chosen[0]
    passphrase = os.environ.get(ENV, "")
    return _env_key(passphrase.encode("utf-8", "surrogateescape")) if passphrase else None


@functools.lru_cache(maxsize=1)
def _env_key(passphrase: bytes) -> Key:
    """One Key for the process: its page keys derived once per file."""
    return Key(passphrase)


def read_key_file(path: Path) -> Key:
    """The passphrase in a file: its whole content, less one line ending."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise BadInput(f"{path}: cannot read the key file ({exc.strerror or exc})") from None
    for ending in (b"\r\n", b"\n"):
        if data.endswith(ending):
            data = data[: -len(ending)]
            break
    if not data:
        raise BadInput(f"{path}: the key file is empty")
    return Key(data)


# The first bytes of each file (device, inode) this process has a connection to, and how
# many it has. Closing any descriptor of a database file drops every POSIX lock this
# process holds on it, its SQLite connections' too; another process could then take the
# file for unused and delete its WAL under them. So while a connection is open, its file
# is never opened again: its first bytes are known. (They cannot change meanwhile, nor
# the inode be reused: encrypt, decrypt and rekey write a new file and rename it.)
_HELD: "dict[tuple[int, int], list]" = {}


def salt_of(path: Path) -> "bytes | None":
    """An encrypted file's salt, or None for a plain SQLite file (or one not there, or empty).

    SQLCipher files are whole pages: a file of another size that does not begin as
    SQLite's do is neither, and is left to SQLite to refuse."""
    try:
        stat = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    held = _HELD.get((stat.st_dev, stat.st_ino))
    if held is not None:
        return held[0]
    try:
        with open(path, "rb") as file:
            head = file.read(SALT_BYTES)
    except (FileNotFoundError, IsADirectoryError):
        return None
    if len(head) < SALT_BYTES or head == PLAIN_MAGIC or stat.st_size % 512:
        return None
    return head


def hold(path: Path, salt: "bytes | None") -> "tuple[int, int] | None":
    """A connection to `path` (which began with `salt`) is open; what release() takes."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    held = _HELD.setdefault((stat.st_dev, stat.st_ino), [salt, 0])
    held[1] += 1
    return (stat.st_dev, stat.st_ino)


def release(file_id: "tuple[int, int] | None") -> None:
    held = _HELD.get(file_id)
    if held is not None:
        held[1] -= 1
        if held[1] <= 0:
            del _HELD[file_id]


def is_encrypted(path: Path) -> bool:
    return salt_of(path) is not None
