"""The interactive console: chat, search, fork and continue in the terminal.

    startup.open_session(args)  -> a Session (archive, engine, current conversation)
    app.run(session)            -> the prompt_toolkit REPL (stdin and stdout are terminals)
    stdin_mode.run(session)     -> messages and slash commands read from a pipe

Everything the user types goes through dispatch.handle(): a slash command
(slash/) or a message sent to the engine (session.py). screen/ writes
(render.py) and keeps the session's figures (stats.py). command.py is
`chatdb chat`, the console's entry among the subcommands.
"""
