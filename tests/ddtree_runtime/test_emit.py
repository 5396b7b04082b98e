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


def test_ignore_eos_emits_eos_as_a_token_and_runs_to_max_tokens() -> None:
    e = Emitter(TOK, [256], max_tokens=4, ignore_eos=True)
    finished = [e.push(t) for t in (TOK.encode("a")[0], 256, TOK.encode("b")[0], 256)]
    assert finished == [False, False, False, True]
    assert e.finish_reason == "length" and e.token_ids[1] == 256 and e.text == "ab"


def test_min_tokens_holds_off_eos_and_stop_strings_until_reached() -> None:
    e = Emitter(TOK, [256], max_tokens=100, stop=["x"], min_tokens=3)
    assert not e.push(256)  # EOS before min_tokens: not the end
    assert not e.push(TOK.encode("x")[0])  # a stop string before min_tokens: kept as text
    assert e.push(TOK.encode("x")[0])  # the third token may stop: a new "x" does
    assert e.finish_reason == "stop" and e.text == "x"
    e = Emitter(TOK, [256], max_tokens=100, min_tokens=2)
    assert not e.push(256) and e.push(256) and e.finish_reason == "stop"
