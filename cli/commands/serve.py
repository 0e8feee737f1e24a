"""`chatdb serve`: an OpenAI-compatible HTTP server whose chats live in the archive."""

import argparse
import ipaddress
import os
from pathlib import Path

from chatdb.errors import ChatdbError
from chatdb.storage.connection import disk_full
from server.users import Keys, KeysFileError, add_user   # no Starlette: it loads late

from .. import output
from ..meaning import add_embed_option
from ..model_options import add_draft_options, add_kv_type_option, sampling_from
from ..options import add_command, context_size, db_path, open_archive, positive_int

DESCRIPTION = """\
Serve the OpenAI API (POST /v1/chat/completions and /v1/completions,
streaming or not; POST /v1/embeddings, from the embedding model of
search by meaning; GET /v1/models; GET /health; each also without /v1) from
the archive. Each request's messages are
matched against the stored conversations: the longest stored path with the
same messages is reused (its KV restored, not recomputed) and only what
follows is added, so clients that resend the whole chat cost only their new
message, after a restart too. The chats appear in `chatdb list`.

Binds 127.0.0.1 unless --host says otherwise; another address needs an API
key (--api-key or $CHATDB_API_KEY), or --allow-no-key (said in a warning).

Limits: a request's head must arrive within --head-timeout (10 s) of the connection opening
(or of its previous response), its body within 60 s (408); an idle
keep-alive connection is closed after 5 s; at most --max-connections stay
open (a new one closes the oldest without a request in flight). Requests
beyond --parallel plus --queue get 503. SIGTERM or Ctrl-C: answers in flight
stop at their next token and are kept (interrupted), waiting requests get
503, then the server stops."""

MAX_BODY = 4 << 20
MAX_CONNECTIONS = 1024   # server.connections.MAX_CONNECTIONS (not imported: it loads uvicorn)


def register(subparsers) -> None:
    parser = add_command(subparsers, "serve", run, help="serve the OpenAI chat API",
                         description=DESCRIPTION, json_help=None)
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=port_number, default=8080,
                        help="port (default 8080; 0 picks a free one)")
    parser.add_argument("--model", metavar="PATH",
                        help="a GGUF model file (default: $CHATDB_MODEL, else SmolLM2-135M-Instruct)")
    parser.add_argument("--ctx", type=context_size, metavar="N",
                        help="context size in tokens of each of the --parallel sequences")
    parser.add_argument("--parallel", type=positive_int, metavar="N",
                        help="requests answered at once, batched on one model (default: from "
                             "the hardware, 2 per core up to 8 on a CPU, 16 on a GPU)")
    parser.add_argument("--queue", type=int, metavar="N",
                        help="requests that may wait for a slot; more get 503 (default 4 x parallel)")
    parser.add_argument("--api-key", metavar="KEY", help="require 'Authorization: Bearer KEY' "
                        "(default: $CHATDB_API_KEY)")
    parser.add_argument("--keys", metavar="FILE", type=Path,
                        help="several users: a file of 'NAME KEY' lines (KEY or sha256:HEX); each "
                             "sees only their own conversations (docs/shared-server.md)")
    parser.add_argument("--user-key", metavar="NAME",
                        help="add user NAME to --keys FILE with a new key, print the key once, "
                             "and exit")
    parser.add_argument("--share-prefix", action="store_true",
                        help="let users' requests share a root system prompt's stored KV (the time "
                             "to a first token then says whether someone sent it before)")
    parser.add_argument("--max-concurrent", type=positive_int, metavar="N",
                        help="requests one key may have at once; more get 429 (default: no limit)")
    parser.add_argument("--tokens-per-minute", type=positive_int, metavar="N",
                        help="tokens one key may use a minute; more get 429 (default: no limit)")
    parser.add_argument("--allow-no-key", action="store_true",
                        help="bind an address other than loopback without an API key")
    parser.add_argument("--max-body", type=positive_int, default=MAX_BODY, metavar="BYTES",
                        help=f"largest request body (default {MAX_BODY})")
    parser.add_argument("--max-tokens", type=positive_int, metavar="N",
                        help="longest answer when a request does not say")
    parser.add_argument("--temperature", type=float, metavar="T",
                        help="temperature when a request does not say")
    parser.add_argument("--alias", metavar="NAME",
                        help="the model's id in /v1/models and in answers (default: the file's name)")
    parser.add_argument("--cors-origin", action="append", default=[], metavar="ORIGIN",
                        help="let web pages from ORIGIN (https://app.example) call the API; "
                             "repeatable, '*' for any (default: none)")
    parser.add_argument("--max-connections", type=positive_int, default=MAX_CONNECTIONS,
                        metavar="N", help=f"open connections at most (default {MAX_CONNECTIONS}, "
                        "within the open-file limit)")
    parser.add_argument("--head-timeout", type=float, default=10.0, metavar="S",
                        help="seconds a request's head may take to arrive (default 10)")
    add_draft_options(parser, " in every slot, verified in the batch with the other requests' "
                              "tokens")
    parser.add_argument("--no-kv", action="store_true",
                        help="neither restore nor store KV state in the archive")
    add_kv_type_option(parser)
    add_embed_option(parser)
    parser.set_defaults(top_k=None, top_p=None, min_p=None, repeat_penalty=None, seed=None)


def run(args) -> int:
    if args.user_key is not None:
        return add_user_key(args)
    if args.keys is not None and args.api_key:
        output.error("give either --api-key (one user) or --keys FILE (several), not both")
        return 2
    try:
        keys = Keys.load(args.keys) if args.keys is not None else None
    except KeysFileError as exc:
        output.error(str(exc))
        return 2
    api_key = None if keys else (args.api_key or os.environ.get("CHATDB_API_KEY") or None)
    if not (api_key or keys) and not _loopback(args.host) and not args.allow_no_key:
        output.error(f"--host {args.host} is reachable from other machines: give --api-key "
                     "(or $CHATDB_API_KEY), or --allow-no-key to serve it without one")
        return 2
    if args.queue is not None and args.queue < 0:
        output.error("--queue must be 0 or more")
        return 2
    if not (api_key or keys) and not _loopback(args.host):   # --allow-no-key: said, since it is risky
        output.warning(f"serving {args.host} without an API key (--allow-no-key): anyone who "
                       "can reach it can read and write every conversation in the archive")
    with open_archive(args, create=True, ask_key=False) as archive:   # a server asks no one
        if archive.read_only:
            where = "the disk is full" if disk_full(archive.db_path) else "it is read-only here"
            raise ChatdbError(f"{archive.db_path}: {where}; chatdb serve stores every request "
                              "and answer, so it needs an archive it can write")
    from server.run import Listen, bind, model_name, serve  # loads Starlette and uvicorn
    from server.app import ServerConfig
    from server.limits import Limits
    from engine.serving import open_turns
    from engine.prompt.completion_prompt import CompletionPrompts
    from server.embeddings import EmbeddingService
    from engine.embed.model_path import resolve_embed_path

    embed_path = resolve_embed_path(args.embed_model, required=args.embed_model is not None)
    sock = bind(Listen(args.host, args.port))
    try:
        turns, parallel, path = open_turns(db_path(args), args.model, n_ctx=args.ctx,
                                           use_kv=not args.no_kv, parallel=args.parallel,
                                           queue=args.queue, warn=output.warning,
                                           kv_type=getattr(args, "kv_type", None),
                                           draft=args.draft, draft_model=args.draft_model)
    except BaseException:
        sock.close()
        raise
    service = EmbeddingService(embed_path, model_name(embed_path)) if embed_path else None
    engine = turns.engine
    config = ServerConfig(args.alias or model_name(path), sampling_from(args), api_key,
                          args.max_body, parallel, tuple(args.cors_origin),
                          engine.model.n_vocab, prompts=CompletionPrompts(engine.model),
                          vocab=engine.model.vocab, embeddings=service,
                          tool_syntax=engine.tool_syntax, keys=keys,
                          limits=Limits(args.max_concurrent, args.tokens_per_minute),
                          share_prefix=args.share_prefix)
    indexer = background_indexer(db_path(args), embed_path)
    try:
        serve(sock, turns, config, max_connections=args.max_connections,
              head_timeout=args.head_timeout)
    finally:
        turns.close()
        if indexer is not None:
            indexer.close()
        if service is not None:
            service.close()
    return 0


def add_user_key(args) -> int:
    """--user-key NAME: a new key for NAME, its hash appended to --keys FILE, shown once."""
    if args.keys is None:
        output.error("--user-key NAME needs --keys FILE: the file the user's key is added to")
        return 2
    try:
        key = add_user(args.keys, args.user_key)
    except KeysFileError as exc:
        output.error(str(exc))
        return 2
    output.print_text(key)
    output.warning(f"user {args.user_key!r} added to {args.keys}; the key is shown only "
                   "this once (the file keeps its hash)")
    return 0


def background_indexer(db, embed_path):
    """The conversations the server writes, embedded as they come (looked for every second)."""
    if embed_path is None:
        return None
    from engine.embed.background import BackgroundIndexer

    return BackgroundIndexer(db, embed_path,
                             on_error=lambda exc: output.warning(f"messages not indexed by meaning: {exc}"))


def port_number(text: str) -> int:
    """An argparse type: a TCP port, 0 to 65535 (0: any free one)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 0 to 65535, got {text!r}")
    return value


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
