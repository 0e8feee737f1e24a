"""Generating an answer: the decode loop, stop strings, and speculative decoding."""
