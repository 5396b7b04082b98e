"""Emission rules shared by AR and DDTree: EOS, stop strings (held back while ambiguous), length."""

from __future__ import annotations

from ddtree_runtime.emit import Emitter
from ddtree_runtime.models import byte_tokenizer

TOK = byte_tokenizer()


def push_text(e: Emitter, text: str) -> list[str]:
    deltas = []
    for t in TOK.encode(text):
        done = e.push(t)
        deltas.append(e.delta())
        if done:
            break
    return deltas


def test_stop_string_is_held_back_then_cut() -> None:
    e = Emitter(TOK, [256], max_tokens=100, stop=["STOP"])
    deltas = push_text(e, "abST_xSTOPzz")
    assert "".join(deltas) == "abST_x" and e.finish_reason == "stop"
    assert deltas[3] == ""  # "ST" could start "STOP": not sent yet
    assert len(e.token_ids) == len("abST_xSTOP")


def test_eos_and_max_tokens() -> None:
    e = Emitter(TOK, [256], max_tokens=100)
    assert not e.push(TOK.encode("a")[0]) and e.push(256)
    assert e.finish_reason == "stop" and e.text == "a" and e.token_ids[-1] == 256
    e = Emitter(TOK, [256], max_tokens=3)
    assert "".join(push_text(e, "abcdef")) == "abc" and e.finish_reason == "length"


def test_incomplete_utf8_is_held_back() -> None:
    e = Emitter(TOK, [256], max_tokens=100)
    ids = TOK.encode("é")
    assert len(ids) == 2
    e.push(ids[0])
    assert e.delta() == ""
    e.push(ids[1])
    assert e.delta() == "é"
