"""Starting the server: load the model, bind the socket, run uvicorn until a signal."""

import contextlib
import logging
import signal
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from .app import ServerConfig, build_app


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


def serve(sock: socket.socket, turns, config: ServerConfig, say=None) -> None:
    """Serve until SIGINT/SIGTERM; answers in flight then stop and are kept, interrupted."""
    app = build_app(turns, config)
    host, port = sock.getsockname()[:2]
    logging.getLogger("chatdb.server").addHandler(logging.StreamHandler(sys.stderr))
    server = _Server(uvicorn.Config(app, log_level="warning", access_log=False,
                                           lifespan="off", timeout_graceful_shutdown=3,
                                           server_header=False))
    where = f"[{host}]" if ":" in host else host
    (say or _say)(f"serving {config.model_name} on http://{where}:{port}/v1 "
                  f"(parallel {config.parallel}{', API key required' if config.api_key else ''})")
    server.run(sockets=[sock])


class _Server(uvicorn.Server):
    """uvicorn re-raises SIGTERM once it has stopped, which would end the process before
    the engine stores the KV of the last answers; here a signal only asks it to stop."""

    @contextlib.contextmanager
    def capture_signals(self):
        previous = {sig: signal.signal(sig, self._stop) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _stop(self, sig, frame) -> None:
        self.force_exit = self.should_exit  # a second signal: stop waiting for open streams
        self.should_exit = True


def _say(line: str) -> None:
    sys.stderr.write(f"chatdb: {line}\n")
    sys.stderr.flush()


def model_name(path: str) -> str:
    return Path(path).stem
