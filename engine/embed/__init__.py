"""Embeddings for search by meaning: llama.cpp's embedding mode, the model's conversion, indexing."""
