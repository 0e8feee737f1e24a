"""The `chatdb` command: the interactive console and the scripting subcommands."""
