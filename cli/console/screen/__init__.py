"""How the console writes: answers streamed, messages and trees shown, the figures."""
