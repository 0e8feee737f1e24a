"""Conversations in and out of the archive: JSON and Markdown exports, chatdb and ChatGPT imports."""
