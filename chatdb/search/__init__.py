"""Searching every message: the full-text index, queries, filters, ranking and snippets."""
