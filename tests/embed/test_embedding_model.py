"""The embedding model: converted from sentence-transformers files, run by llama.cpp."""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from engine.embed.chunks import CHUNK_TOKENS, chunk_text
from engine.embed.convert import ConvertError, convert
from engine.embed.model import EmbeddingModel

ASSETS = Path(__file__).resolve().parents[1] / "assets"


def _reference():
    spec = importlib.util.spec_from_file_location("bert_reference", ASSETS / "bert_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ReferenceBert


def test_converted_model_computes_what_its_weights_do(tiny_bert):
    """llama.cpp on the converted GGUF gives the numpy forward pass of the safetensors."""
    folder, gguf_path = tiny_bert
    reference = _reference()(folder)
    with EmbeddingModel(str(gguf_path)) as model:
        texts = ["hello worlds, the cat sat on the mat!", "running tokenizer", "a b a b"]
        got = model.embed(texts)
        for text, vector in zip(texts, got):
            expected = reference.embed(model.tokens(text))
            assert float(vector @ expected) > 0.9999, text


def test_wordpiece_vocabulary_tokenizes_as_bert_does(tiny_bert):
    """Word starts and ## continuations, [CLS] first and [SEP] last, lowercased."""
    folder, gguf_path = tiny_bert
    vocab = json.loads((folder / "tokenizer.json").read_text())["model"]["vocab"]
    with EmbeddingModel(str(gguf_path)) as model:
        ids = model.tokens("Hello WORLDS, running!")
    pieces = ["[CLS]", "hello", "world", "##s", ",", "run", "##ning", "!", "[SEP]"]
    assert ids == [vocab[p] for p in pieces]


def test_a_model_that_is_not_bert_is_refused(tiny_bert, tmp_path):
    folder, _ = tiny_bert
    config = json.loads((folder / "config.json").read_text())
    other = tmp_path / "gpt"
    other.mkdir()
    for f in folder.iterdir():
        if f.is_file():
            (other / f.name).write_bytes(f.read_bytes())
    (other / "config.json").write_text(json.dumps({**config, "model_type": "gpt2"}))
    with pytest.raises(ConvertError, match="not bert"):
        convert(other, tmp_path / "out.gguf")
    assert not (tmp_path / "out.gguf").exists()


def test_meaning_not_words(embedder):
    """A paraphrase sharing no word is nearer than a text on another subject."""
    query, para, other = embedder.model.embed([
        "my file transfers to cloud storage keep failing",
        "retry the S3 multipart PUT on timeout",
        "a recipe for banana bread with walnuts"])
    assert float(query @ para) > float(query @ other) + 0.1
    assert abs(float(np.linalg.norm(query)) - 1) < 1e-5


def test_sequences_batched_in_one_pass_equal_each_alone(embedder):
    texts = ["short", "a somewhat longer sentence about databases and their indexes",
             "third one " * 40, "日本語のテキストも埋め込める"]
    passes = embedder.model.passes
    together = embedder.model.embed(texts)
    assert embedder.model.passes == passes + 1
    for text, vector in zip(texts, together):
        alone = embedder.model.embed([text])[0]
        assert float(vector @ alone) > 0.999  # q8_0 activations round by batch


def test_long_messages_are_cut_into_chunks_the_model_reads_whole(embedder):
    paragraph = ("The write-ahead log keeps readers and the writer apart. " * 12).strip()
    text = "\n\n".join([paragraph] * 6)
    chunks = chunk_text(text, embedder.model.count_tokens)
    assert len(chunks) > 1
    for chunk in chunks:
        assert text[chunk.start:chunk.start + len(chunk.text)] == chunk.text
        assert len(embedder.model.tokens(chunk.text)) <= CHUNK_TOKENS
    (message,) = embedder.embed_messages([(1, text)])
    assert message.vectors.shape == (len(chunks), embedder.dims)
    assert embedder.embed_messages([(2, "  \n ")])[0].vectors.shape == (0, embedder.dims)
