"""Starting the server: load the model, bind the socket, run uvicorn until a signal."""

import contextlib
import ctypes
import logging
import signal
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from .app import ServerConfig, build_app
from .connections import (HEAD_TIMEOUT_S, KEEP_ALIVE_S, MAX_CONNECTIONS, bounded_protocol,
                          connection_limit)

GRACE_S = 30   # at most, after a signal, for the stopped answers' responses to go out


@dataclass
class Listen:
    host: str
    port: int


def bind(listen: Listen) -> socket.socket:
    """The listening socket, bound before the model loads: a taken port fails at once."""
    family = socket.AF_INET6 if ":" in listen.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((listen.host, listen.port))
    except OSError:
        sock.close()
        raise
    sock.listen(128)
    return sock


def serve(sock: socket.socket, turns, config: ServerConfig, say=None,
          max_connections: int = MAX_CONNECTIONS, head_timeout: float = HEAD_TIMEOUT_S) -> None:
    """Serve until SIGINT/SIGTERM. Then answers in flight stop at their next token and are
    kept, marked interrupted, their streams ended as for any answer; requests still
    waiting get a 503; once those responses are out the server stops."""
    fixed_mmap_threshold()
    app = build_app(turns, config)
    host, port = sock.getsockname()[:2]
    logging.getLogger("chatdb.server").addHandler(logging.StreamHandler(sys.stderr))
    protocol = bounded_protocol(connection_limit(max_connections), head_timeout)
    server = _Server(uvicorn.Config(app, log_level="warning", access_log=False, http=protocol,
                                    lifespan="off", timeout_graceful_shutdown=GRACE_S,
                                    timeout_keep_alive=KEEP_ALIVE_S, server_header=False),
                     on_stop=turns.cancel_all)
    where = f"[{host}]" if ":" in host else host
    (say or _say)(f"serving {config.model_name} on http://{where}:{port}/v1 "
                  f"(parallel {config.parallel}{', API key required' if config.api_key else ''})")
    server.run(sockets=[sock])


M_MMAP_THRESHOLD = -3          # glibc's mallopt parameter
MMAP_THRESHOLD = 128 << 10     # its default, kept: blocks from here up are mmapped


def fixed_mmap_threshold() -> None:
    """Keep large blocks (chats' states, their copies) mmapped, so each goes back to the
    system when freed. glibc raises its threshold after every large free, up to 32 MiB, and
    states of growing chats then come from the heap and fragment it: under bench/soak.py
    the server's memory, less the states it keeps by design, grew about 9 MiB a minute
    (1 % in all with the threshold fixed). Elsewhere than glibc nothing is done."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return
    libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)


class _Server(uvicorn.Server):
    """uvicorn re-raises SIGTERM once it has stopped, which would end the process before
    the engine stores the KV of the last answers; here a signal only asks it to stop, and
    first stops the answers (`on_stop`), so that their responses end before uvicorn's
    grace runs out and it cancels the requests and closes the event loop under them."""

    def __init__(self, config, on_stop):
        super().__init__(config)
        self.on_stop = on_stop

    @contextlib.contextmanager
    def capture_signals(self):
        previous = {sig: signal.signal(sig, self._stop) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _stop(self, sig, frame) -> None:
        if not self.should_exit:
            self.on_stop()
        self.force_exit = self.should_exit  # a second signal: stop waiting for open streams
        self.should_exit = True


def _say(line: str) -> None:
    sys.stderr.write(f"chatdb: {line}\n")
    sys.stderr.flush()


def model_name(path: str) -> str:
    return Path(path).stem
