"""An answer's tokens as sampled: streamed text, stop strings, and speculative decoding
(drafters, the draft policy, verification)."""
