"""chatdb's OpenAI-compatible HTTP front-end (Starlette on uvicorn)."""
