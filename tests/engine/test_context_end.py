"""An answer that runs into the end of the context ends there, kept, in `ask` and the console.

Both answer through Engine.reply; the model's end tokens are kept out with
logit_bias so the answer can only stop at the context's end.
"""

from engine.llama.sampling import SamplingSettings

# SmolLM2's end-of-generation tokens (<|endoftext|>, <|im_end|>, <reponame>) and <|im_start|>
# (a turn marker, which ends an answer too)
NO_END = ((0, -100.0), (1, -100.0), (2, -100.0), (4, -100.0))
LONG = "Tell me everything you know about ships. " * 40


def test_an_answer_at_the_context_end_is_kept_and_the_chat_goes_on(open_engine):
    settings = SamplingSettings(temperature=0, max_tokens=4000, logit_bias=NO_END)
    archive, engine = open_engine(n_ctx=512, sampling=settings)
    conv = archive.create_conversation("ships")
    result = engine.reply(conv.id, LONG)
    assert result.finish == "context" and result.status == "complete"
    assert result.text and result.prompt_tokens + result.completion_tokens >= 512 - 2
    stored = archive.message(result.message_id)
    assert stored.content == result.text and stored.meta["finish"] == "context"
    # The next turn reads a window of the chat (the old turns left out) and answers.
    again = engine.reply(conv.id, "Thanks.", sampling=SamplingSettings(temperature=0, max_tokens=8))
    assert again.completion_tokens > 0 and again.left_out_messages > 0
