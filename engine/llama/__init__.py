"""llama.cpp through its low-level API: the model and its context, sequences, batches, samplers."""
