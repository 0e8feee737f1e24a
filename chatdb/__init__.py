"""The archive: conversations, messages, tokens and KV state in one SQLite file (no llama.cpp here)."""
