"""llama.cpp's sequence state as bytes: cut into per-message rows, put back together, checked."""
