"""Inference: a llama.cpp model whose KV state lives in the chatdb archive."""
