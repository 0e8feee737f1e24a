"""Inference: a llama.cpp model whose KV state lives in the chatdb archive.

The engine's face is here: chat.py (Engine: answer any message of any
conversation), serving.py (an engine of several sequences for a server or
for warming), describe.py, errors.py. Below it, the wings, each importing
only those listed after it:

    batching/  a turn's one pipeline: jobs on slots with explicit states, stepped together
               (the console's one slot, the server's N, warming's), prefill pacing, results
    decode/    an answer's stream, stop strings, speculative decoding (drafters, the policy, verifying guesses)
    embed/     embeddings for search by meaning: the model, its conversion, passages, indexing
    machine/   the hardware: devices, CPUs and threads, the offload plan, forward-pass costs
    kv/        a sequence's KV: its sources (live, memory, archive), the cache, the writer
    prompt/    chat templates, a path's tokens, windows, a turn's prompt fitted to the context
    state/     llama.cpp's state bytes: cut into rows, assembled back, checked at start-up
    llama/     llama.cpp itself: model and context, sequences, batches, samplers, GGUF headers
"""
