"""Templates for models without one: the family's llama.cpp format; turn markers end answers."""

import numpy as np
import pytest

from engine.decode.stream import Stream
from engine.llama.model import ContextConfig, Model
from engine.prompt.chat_format import ChatFormat
from engine.prompt.turn_markers import turn_markers
from engine.prompt.template import CHATML, ChatTemplate


@pytest.fixture(scope="module")
def gemma(gemma_path):
    # One thread: two wait for each other at every layer, and stall whenever
    # another process (another test) holds one of the cores.
    m = Model(str(gemma_path), ContextConfig(n_ctx=512, n_batch=512, n_threads=1, flash_attn=False))
    yield m
    m.close()


def test_gemma_gets_its_family_format(gemma):
    assert "tokenizer.chat_template" not in gemma.metadata()
    chat_format = ChatFormat.of(gemma)
    assert chat_format.kind == "llama.cpp:gemma"
    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "  Hi  "}]
    text = chat_format.template.render(chat, add_generation_prompt=True)
    # BOS first, the system prompt merged into the user turn, the text verbatim (not trimmed).
    assert text == ("<bos><start_of_turn>user\nBe brief.\n\n  Hi  <end_of_turn>\n"
                    "<start_of_turn>model\n")
    tokens = gemma.tokenize(text)
    assert gemma.token_text(tokens[0]) == "<bos>" and tokens.count(gemma.tokenize("<start_of_turn>")[0]) == 2
    assert chat_format.template.message_texts(chat + [{"role": "assistant", "content": "Hello."}])[-1] \
        == "<start_of_turn>model\nHello.<end_of_turn>\n"


def test_gemma_turn_end_token_ends_the_answer(gemma):
    (end_of_turn,) = gemma.tokenize("<end_of_turn>")
    assert gemma.is_eog(end_of_turn)
    assert ChatFormat.of(gemma).markers == ["<end_of_turn>", "<start_of_turn>user", "<start_of_turn>model"]


def test_chatml_markers():
    assert turn_markers(ChatTemplate(CHATML)) == ["<|im_end|>", "<|im_start|>user", "<|im_start|>assistant"]


def test_marker_written_as_text_is_cut_from_answer_and_tokens(gemma):
    """A model prompted in ChatML that its vocabulary lacks writes the markers as text."""
    printed = []
    stream = Stream(gemma, 100, printed.append, None, stop=turn_markers(ChatTemplate(CHATML)))
    tokens = gemma.tokenize("Red and blue.<|im_end|>\n<|im_start|>user\nMore", special=False)
    assert len(tokens) > 8  # spelled out in pieces, not special tokens
    stopped_at = next(i for i, t in enumerate(tokens) if stream.emit(t))
    gen = stream.close()
    assert gen.text == "".join(printed) == "Red and blue."
    assert gen.finish == "stop" and stopped_at < len(tokens) - 3
    kept = b"".join(gemma.piece(t) for t in gen.tokens).decode()
    assert "Red and blue.".startswith(kept) and gen.covered == len(kept)
    assert np.all(np.asarray(gen.tokens) == np.asarray(tokens[:len(gen.tokens)]))
