"""A sequence's KV and where it comes from: the live context, memory, the archive; storing it."""
