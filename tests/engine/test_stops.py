"""Stop strings: the answer ends before the first one, and no part of it is streamed."""

from engine.decode.stop_strings import StopText


def stream(pieces, stops):
    stop = StopText(stops)
    out = []
    for piece in pieces:
        out.append(stop.feed(piece))
        if stop.hit:
            return out, True
    out.append(stop.flush())
    return out, False


def test_a_stop_split_across_pieces_is_never_streamed():
    out, hit = stream(["Hello wo", "rld. EN", "D here"], ["END"])
    assert hit and "".join(out) == "Hello world. "
    assert out[1] == "rld. "           # "EN" was held back until "D" showed it is the stop


def test_text_that_only_looks_like_a_stop_is_let_through():
    out, hit = stream(["a E", "Nd", " b"], ["END"])
    assert not hit and "".join(out) == "a ENd b"


def test_the_earliest_of_several_stops_wins():
    out, hit = stream(["one\n\ntwo ### three"], ["###", "\n\n"])
    assert hit and "".join(out) == "one"


def test_without_stops_text_passes_unchanged():
    out, hit = stream(["a", "b"], [])
    assert not hit and out == ["a", "b", ""]
