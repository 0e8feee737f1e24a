"""A turn's one pipeline: jobs on slots, each a sequence of the context, stepped together.

One forward pass per step holds what every busy slot computes next (a
prompt's chunk, a token and its drafted guesses, an answer's tail): one slot
for the console and `ask`, N for the server and for warming.
"""
