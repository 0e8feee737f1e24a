"""From a conversation path to the prompt the model reads: templates, tokens, windows."""
