"""JsonStream reads a document a value at a time and makes of it what json.loads does:
the same values, the same errors at the same line and column, however the text is cut."""

import io
import json
import random

import pytest

from chatdb.transfer.json_stream import BadJSON, JsonStream, NotUTF8, TooLarge

CHUNKS = (1, 2, 3, 7, 64, 1 << 20)   # bytes a read returns: every cut falls somewhere


def streamed(data: bytes, chunk: int):
    """The document as the stream reads it: a top-level array element by element."""
    stream = JsonStream(io.BytesIO(data).read, chunk=chunk)
    value = list(stream.elements()) if stream.opens() == "[" else stream.value()
    stream.end()
    return value


def outcome(read, data: bytes):
    try:
        return ("value", read(data))
    except (json.JSONDecodeError, BadJSON) as exc:
        return ("error", exc.msg, exc.lineno, exc.colno)
    except (UnicodeDecodeError, NotUTF8):   # a cut byte order mark
        return ("not UTF-8",)


def loads(data: bytes):
    return json.loads(data.decode("utf-8-sig"))


def _value(rnd: random.Random, depth: int = 0):
    kinds = [lambda: rnd.randrange(-10**30, 10**30), lambda: rnd.random() * 1e5, lambda: -1.5e-7,
             lambda: rnd.choice([True, False, None]),
             lambda: "".join(rnd.choice('ab\n"\\é借😀\ud800') for _ in range(rnd.randrange(6))),
             lambda: [_value(rnd, depth + 1) for _ in range(rnd.randrange(4))],
             lambda: {str(rnd.randrange(9)): _value(rnd, depth + 1) for _ in range(rnd.randrange(4))}]
    return rnd.choice(kinds if depth < 3 else kinds[:5])()


def test_every_document_and_every_damage_reads_as_json_loads_reads_it():
    rnd = random.Random(23)
    for _ in range(150):
        doc = [_value(rnd) for _ in range(rnd.randrange(6))]
        text = json.dumps(doc, ensure_ascii=True, indent=rnd.choice([None, 1, "\t"]))
        data = (b"\xef\xbb\xbf" if rnd.random() < 0.2 else b"") + text.encode()
        for variant in (data, data[:rnd.randrange(len(data) + 1)], data + b" x",
                        data.replace(b",", b";", 1), data.replace(b":", b"", 1),
                        data.replace(b"]", b"}", 1)):
            want = outcome(loads, variant)
            for chunk in CHUNKS:
                assert repr(outcome(lambda d: streamed(d, chunk), variant)) == repr(want), \
                    (variant, chunk)


def test_a_top_level_object_is_read_member_by_member():
    data = b'{"format": "x", "n": 1.5e3, "items": [1, {"a": [2]}, "\\ud800"], "last": null}'
    for chunk in CHUNKS:
        stream, seen = JsonStream(io.BytesIO(data).read, chunk=chunk), {}
        for key in stream.members():
            seen[key] = list(stream.elements()) if key == "items" else stream.value()
        stream.end()
        assert seen == json.loads(data)


def test_bytes_that_are_not_utf8_are_named_by_their_offset_in_the_file():
    data = b'\xef\xbb\xbf["ok", "caf\xc3\xa9", "bad \xff here"]'
    for chunk in CHUNKS:
        with pytest.raises(NotUTF8) as caught:
            streamed(data, chunk)
        assert caught.value.offset == data.index(b"\xff")


def test_a_value_longer_than_the_limit_is_refused_before_it_is_read_whole():
    reads = []
    body = io.BytesIO(b'[{"a": "' + b"x" * 10_000_000 + b'"}]')

    def read(n):
        reads.append(n)
        return body.read(n)
    stream = JsonStream(read, limit=1 << 20, chunk=1 << 16)
    with pytest.raises(TooLarge):
        list(stream.elements())
    assert body.tell() < 3 << 20   # not the whole 10 MB


def test_whitespace_and_many_small_values_are_streamed_past_the_limit():
    data = b"[" + b" " * 3_000_000 + b",".join(b"[%d]" % i for i in range(200_000)) + b"]"
    stream = JsonStream(io.BytesIO(data).read, limit=1 << 20)
    assert sum(v[0] for v in stream.elements()) == sum(range(200_000))
    stream.end()
