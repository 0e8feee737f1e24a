"""Several turns sharing one context and one forward pass per step: slots and their scheduler."""
