"""KV state in the archive: segments per message and fingerprint, and their compression."""
