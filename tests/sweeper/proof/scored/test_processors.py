"""The request's logit processors in the scored proof (`proof/scored/processors.py`): logit bias and
the repetition, frequency and presence penalties rebuilt per position from the raw logprobs
returned, the prompt's ids and the sample's own prefix. A penalised token's PIT holds the
brute-force one over a small full vocabulary on both bases (exact: the claims check and u stays
exact); a rebuild that is not sound leaves the position unrebuilt, naming the processor, and the
point `unproven`, never `distribution-ok`; a sampler that ignores a repetition penalty of 1.3 is
caught at N = 96; an AR control drawn with other processors is no control."""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sweeper.proof.scored.judge import control, judge
from sweeper.proof.scored.processed import pit
from sweeper.proof.scored.processors import Sampling, Unrebuilt, contexts, logits_of
from sweeper.proof.scored.rebuilt import checked_pit
from sweeper.proof.verdicts import proven, standing
from sweeper.spec import DeterminismSpec
from tests.sweeper.proof.scored.scored_data import above_of, processed, ranked

VOCAB, K = 48, 8
VLLM = ("logit_bias", "repetition_penalty", "frequency_penalty", "presence_penalty")
SGLANG = ("frequency_penalty|presence_penalty|repetition_penalty", "logit_bias")
CUTS = ("temperature", "top_k", "top_p", "min_p")
POLICY = DeterminismSpec()


def penalised(
    z: np.ndarray,
    prompt: Sequence[int],
    prefix: Sequence[int],
    asked: dict[str, Any],
    logit_order: Sequence[str] = VLLM,
    scope: str = "prompt+output",
) -> np.ndarray:
    """The logits after the processors, from their definitions (vLLM's sampler: bias added,
    a repetition penalty dividing a positive logit and multiplying a negative one of every
    token seen, frequency times the output count and presence subtracted)."""
    out = np.bincount(np.asarray(prefix, dtype=np.int64), minlength=z.size)
    seen = out > 0
    if scope == "prompt+output":
        seen |= np.bincount(np.asarray(prompt, dtype=np.int64), minlength=z.size) > 0
    x = z.astype(np.float64).copy()
    for group in logit_order:
        for step in group.split("|"):
            if step == "logit_bias":
                for token, bias in asked.get("logit_bias") or ():
                    x[token] += bias
            elif step == "repetition_penalty" and asked.get("repetition_penalty"):
                rp = asked["repetition_penalty"]
                x = np.where(seen, np.where(x > 0, x / rp, x * rp), x)
            elif step == "frequency_penalty":
                x -= (asked.get("frequency_penalty") or 0.0) * out
            elif step == "presence_penalty":
                x -= (asked.get("presence_penalty") or 0.0) * seen_output(out)
    return x


def seen_output(out: np.ndarray) -> np.ndarray:
    return (out > 0).astype(np.float64)


def row(
    z: np.ndarray, token: int, probs: np.ndarray | None = None, k: int = K, lse: bool = True
) -> dict[str, Any]:
    """A position's `PositionScore`: raw logprobs of `z` and their top k, its log-sum-exp where
    the scorer returns it, and, with `probs`, the exact basis's claims."""
    total = float(np.log(np.exp(z - z.max()).sum()) + z.max())
    raw = z - total
    order = ranked(raw)
    out: dict[str, Any] = {
        "token": token,
        "logprob": float(raw[token]),
        "rank": int(np.flatnonzero(order == token)[0]) + 1,
        "top": [(int(i), float(raw[i])) for i in order[:k]],
        "logsumexp": total if lse else None,
    }
    if probs is not None:
        p = float(probs[token])
        out |= {"p": p, "above": above_of(probs, token) if p > 0 else 1.0}
    return out


def draw_case(rng: np.random.Generator) -> tuple[np.ndarray, list[int], list[int], dict[str, Any]]:
    """Random logits (both signs, as a model's), prompt, prefix and processors: a repetition
    penalty >= 1, frequency and presence >= 0, negative bias anywhere and positive bias on the
    best tokens (always returned)."""
    z = rng.normal(size=VOCAB) * rng.choice([1.0, 3.0, 6.0]) + rng.normal() * 2
    prompt = [int(t) for t in rng.integers(0, VOCAB, size=12)]
    prefix = [int(t) for t in rng.integers(0, VOCAB, size=int(rng.integers(0, 10)))]
    best = ranked(z)[:3]
    bias = [(int(t), float(-rng.uniform(0.5, 20))) for t in rng.choice(VOCAB, 3, replace=False)]
    bias += [(int(best[rng.integers(0, 3)]), float(rng.uniform(0.5, 3)))]
    bias = list({t: b for t, b in bias}.items())
    asked = {
        "repetition_penalty": float(rng.choice([1.0, 1.3, 1.8])),
        "frequency_penalty": float(rng.choice([0.0, 0.4])),
        "presence_penalty": float(rng.choice([0.0, 0.7])),
        "logit_bias": tuple(bias),
    }
    return z, prompt, prefix, asked


#: Temperature and cuts, with the repetition penalty's scope: vLLM's (the prompt counted, bias
#: first) or SGLang's (the output only, bias after the penalties).
CUT_SETTINGS = [
    ({"temperature": 0.7}, "prompt+output"),
    ({"temperature": 0.7}, "output"),
    ({"temperature": 0.7, "top_p": 0.9}, "prompt+output"),
    ({"temperature": 0.5, "top_p": 0.8, "top_k": 5}, "output"),
    ({"temperature": 1.0, "top_k": 12}, "prompt+output"),
    ({"temperature": 1.3, "top_p": 0.95}, "prompt+output"),
    ({"temperature": 0.8, "min_p": 0.1}, "prompt+output"),
]


@pytest.mark.parametrize(
    ("cuts", "scope"),
    CUT_SETTINGS,
    ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()) if isinstance(s, dict) else s,
)
def test_a_penalised_tokens_pit_holds_the_brute_force_one_on_both_bases(
    cuts: dict[str, Any], scope: str
) -> None:
    rng = np.random.default_rng(5)
    asked_cuts: dict[str, Any] = {
        key: cuts.get(key) for key in ("temperature", "top_p", "top_k", "min_p")
    }
    logit_order = VLLM if scope == "prompt+output" else ("repetition_penalty", "logit_bias")
    checked = exact = proofs = 0
    for case in range(25):
        z, prompt, prefix, asked = draw_case(rng)
        if scope == "output":  # SGLang: repetition over the output only, bias after it
            asked |= {"frequency_penalty": 0.0, "presence_penalty": 0.0}
        sampling = Sampling(
            order=CUTS, logit_order=logit_order, repetition_scope=scope, **asked_cuts, **asked
        )
        x = penalised(z, prompt, prefix, asked, logit_order, scope)
        probs = processed(x, order=CUTS, **asked_cuts)
        context = contexts(prompt, [*prefix, 0])[-1]
        for token in {*ranked(z)[: K + 3].tolist(), *rng.integers(0, VOCAB, 4).tolist()}:
            position = row(z, int(token), probs)
            got = pit(position, "topk", sampling, 0.0, vocab=VOCAB, context=context)
            assert got.unrebuilt is None, got.unrebuilt
            if got.impossible is not None:
                assert probs[token] == 0.0, (case, token)  # never a false proof
                proofs += 1
                continue
            checked_, wrong = checked_pit(
                position, "exact", sampling, 0.0, vocab=VOCAB, context=context
            )
            assert wrong is None, (case, token, wrong.text() if wrong else "")
            if probs[token] == 0.0:
                continue
            if checked_.exact:  # the claim, rebuilt exactly or held by the interval
                exact += 1
            assert checked_.bounds(0.5)[0] == pytest.approx(
                above_of(probs, token) + 0.5 * probs[token], abs=1e-9
            )
            known = [t for t, _ in position["top"] if x[t] - position["logsumexp"] >= min(
                lp for _, lp in position["top"])]  # fmt: skip
            for v in (0.0, 0.4, 1.0):
                if token in known:
                    truth = above_of(probs, token) + v * probs[token]
                else:  # below every known token: uniform above their processed mass
                    q = float(probs[known].sum())
                    truth = q + v * (1 - q)
                lo, hi = got.bounds(v)
                assert lo - 1e-9 <= truth <= hi + 1e-9, (case, token, v, lo, truth, hi)
            checked += 1
    assert checked > 20 and exact > 10, (checked, exact)
    # A cut inside the returned top k proves; top-k beyond it cannot once the processors
    # reorder the tokens (the raw rank is not the processed one).
    inside = cuts.get("top_p") or cuts.get("min_p") or (cuts.get("top_k") or K + 1) <= K
    assert (proofs > 0) == bool(inside)


def test_a_logit_bias_alone_is_rebuilt_with_no_tokens_counted() -> None:
    """A logit bias counts no tokens, so a record asking only for one gives its positions no
    `Context` (`Sampling.contexts`): each is still rebuilt, its exact claims checked and held."""
    z = np.linspace(4.0, -4.0, VOCAB)
    asked: dict[str, Any] = {"logit_bias": ((0, -3.0), (2, 1.5))}
    sampling = Sampling(0.7, top_p=0.9, order=CUTS, logit_order=VLLM, **asked)
    probs = processed(penalised(z, [], [], asked), 0.7, top_p=0.9, order=CUTS)
    positions = [row(z, token, probs) for token in range(6)]
    assert 0 < sum(p["p"] > 0 for p in positions) < 6  # kept and removed tokens both
    counted = sampling.contexts([5, 6], positions)
    assert counted == [None] * 6
    for position, context in zip(positions, counted, strict=True):
        got, wrong = checked_pit(position, "exact", sampling, 0.0, vocab=VOCAB, context=context)
        assert got.unrebuilt is None and wrong is None
        if position["p"] > 0:  # kept: its PIT's floor the rebuilt mass above it
            assert got.bounds(0.0)[0] == pytest.approx(above_of(probs, position["token"]))


def test_an_unsound_rebuild_names_the_processor() -> None:
    z = np.linspace(4.0, -4.0, VOCAB)
    position = row(z, 0)
    context = contexts([3, 3, 40], [1, 41, 0])[-1]

    def why(lse: Any = True, **asked: Any) -> str:
        sampling = Sampling(0.7, order=CUTS, **asked)
        got = pit(row(z, 0, lse=lse), "topk", sampling, 0.0, vocab=VOCAB, context=context)
        return got.unrebuilt.text() if got.unrebuilt is not None else ""

    assert why(logit_bias=((42, 5.0),)) == (
        "logit_bias: +5 on token 42 outside the scorer's top 8: cannot be rebuilt"
    )
    assert why(logit_bias=((42, -5.0), (3, 2.0))) == ""  # lowered, or returned: sound
    assert why(repetition_penalty=0.8) == (
        "repetition_penalty: 0.8 < 1 raises token 40 outside the scorer's top 8: cannot be rebuilt"
    )
    assert why(frequency_penalty=-0.5).startswith("frequency_penalty: -0.5 < 0 raises token")
    assert why(presence_penalty=-0.5).startswith("presence_penalty: -0.5 < 0 raises token")
    assert why(lse=False, repetition_penalty=1.3) == (
        "repetition_penalty: 1.3 scales returned token 1's raw logit by its sign, and the scorer "
        "returned no log-sum-exp to recover it: cannot be rebuilt"
    )
    assert why(lse=False, frequency_penalty=0.5, logit_bias=((2, 1.0),)) == ""  # additive
    assert why(response_format='{"type":"json_object"}') == (
        "response_format: the grammar's mask is not rebuilt by this judge: cannot be rebuilt"
    )
    both = {"repetition_penalty": 1.3, "frequency_penalty": 0.2, "logit_order": SGLANG}
    assert why(**both) == (
        "repetition_penalty: applied in an unspecified order with frequency_penalty "
        "(frequency_penalty|presence_penalty|repetition_penalty): cannot be rebuilt"
    )
    absent = {"repetition_penalty": 1.3, "logit_order": ("logit_bias",)}
    assert why(**absent) == (
        "repetition_penalty: the scorer's engine states no repetition_penalty step: cannot be "
        "rebuilt"
    )
    assert pit(position, "topk", Sampling(0.7, repetition_penalty=1.3), 0.0).unrebuilt is not None


# -- the scored judge on samples drawn with and without the penalty ----------------------------

PROMPTS, POSITIONS, V, N = 4, 16, 32, 96


@functools.cache
def _target() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    logits = rng.normal(size=(PROMPTS, POSITIONS, V)) * rng.choice(
        [1.5, 3.0], (PROMPTS, POSITIONS, 1)
    )
    prompts = rng.integers(0, V, size=(PROMPTS, 10))
    return logits + 1.0, prompts


def sampled(
    asked: dict[str, Any],
    *,
    ignored: bool = False,
    role: str = "test",
    seed: int = 0,
    basis: str = "exact",
    extra: dict[str, Any] | None = None,
    n: int = N,
) -> list[dict[str, Any]]:
    """`n` samples per prompt drawn token by token from the penalised target (`ignored`: the
    penalty left out at 3 positions in 4, a drafted node's fault), scored as asked."""
    logits, prompts = _target()
    rng = np.random.default_rng(seed)
    temperature = asked["temperature"]
    rows = []
    for q in range(PROMPTS):
        prompt = prompts[q].tolist()
        tokens = np.zeros((n, 0), dtype=np.int64)
        scored: list[list[dict[str, Any]]] = [[] for _ in range(n)]
        for at in range(POSITIONS):
            z = logits[q, at]
            probs = [
                processed(penalised(z, prompt, t.tolist(), asked), temperature) for t in tokens
            ]
            drawn = probs if not (ignored and at % 4) else [processed(z, temperature)] * n
            cdf = np.cumsum(np.stack(drawn), axis=1)
            picks = np.minimum((cdf < rng.random((n, 1))).sum(axis=1), V - 1)
            for index, token in enumerate(picks):
                claims = probs[index] if basis == "exact" else None
                scored[index].append(row(z, int(token), claims))
            tokens = np.concatenate([tokens, picks[:, None]], axis=1)
        for index, positions in enumerate(scored):
            rows.append({
                "point_id": "p1", "role": role, "prompt_id": f"q{q}", "index": index,
                "scorer": "self", "basis": basis, "order": list(CUTS), "k": K,
                "logit_order": list(VLLM), "repetition_scope": "prompt+output",
                "prompt_token_ids": prompt, "positions": positions, "error": None,
                **{key: json.dumps(dict(v)) if key == "logit_bias" else v
                   for key, v in asked.items()}, **(extra or {}),
            })  # fmt: skip
    return rows


REPEAT = {"temperature": 1.0, "repetition_penalty": 1.3}


@functools.cache
def _control() -> dict[str, Any]:
    return {**control(sampled(REPEAT, role="control", seed=99), POLICY), **REPEAT}


@pytest.mark.slow
def test_a_sampler_ignoring_a_repetition_penalty_is_caught_at_n_96() -> None:
    """The AR control's samples, drawn with the penalty, raise no alarm; samples drawn without
    it at 3 positions in 4 are shifted in most draws."""
    quiet = _control()
    assert quiet["scored_control_p"] > POLICY.alpha and not quiet["scored_control_impossible"]
    caught = [
        judge(sampled(REPEAT, ignored=True, seed=s), POLICY, control_point=quiet)[0]
        for s in (2, 3, 4)
    ]
    assert sum(v.verdict in ("shifted", "impossible-token") for v in caught) >= 2, caught


#: An AR point's row as the judge reads it: its request columns and its control's verdict.
QUIET = {
    **REPEAT,
    "scored_control_p": 0.5,
    "scored_control_tokens": 6144,
    "scored_control_impossible": 0,
    "scored_control_near_ties": 0,
}


def test_an_unrebuilt_point_is_unproven_naming_the_processor_never_ok() -> None:
    rows = sampled(REPEAT, seed=1, n=4)
    assert "not tested" not in judge(rows, POLICY, control_point=QUIET)[0].detail  # rebuilt
    for record in rows:
        for position in record["positions"]:
            position["logsumexp"] = None
    found, _ = judge(rows, POLICY, control_point=QUIET)
    assert found.verdict == "unproven" and standing(found.verdict) == "unjudged"
    assert not proven(found.verdict)  # never feasible, never a violation
    assert "position(s) not tested" in found.detail
    assert "repetition_penalty: 1.3 scales returned token" in found.detail
    regex = {"regex": "[a-z]+"}
    rows = sampled(REPEAT, seed=1, extra=regex, n=4)
    grammar, _ = judge(rows, POLICY, control_point={**QUIET, **regex})
    assert grammar.verdict == "unproven" and "regex: the grammar's mask" in grammar.detail


def test_an_ar_control_drawn_with_other_processors_is_no_control() -> None:
    rows = sampled(REPEAT, seed=1, n=4)
    found, _ = judge(rows, POLICY, control_point={**QUIET, "repetition_penalty": None})
    assert found.verdict == "unproven"
    assert "the AR control was drawn with other processors" in found.detail
    assert "repetition_penalty 1.3 here, None there" in found.detail
    # Inactive spellings are the same request: top-p 1 is none, a penalty of 1 none.
    same = {**QUIET, "top_p": 1.0, "presence_penalty": 0.0}
    assert "other processors" not in judge(rows, POLICY, control_point=same)[0].detail


#: One real SGLang 0.5.15 sample under `repetition_penalty: 1.3` as its scorer recorded it
#: (`bench/features_real.py --sglang`: the AR server on this CPU, its own input-token logprobs,
#: top 64 raw, no log-sum-exp; the `ScoreRecord` row as written).
SGLANG_RECORD = Path(__file__).parent / "data" / "sglang-0.5.15-repetition.json"


def test_sglang_samples_are_rebuilt_under_sglangs_repetition_convention() -> None:
    """SGLang 0.5.15's repetition penalty counts output tokens only (its
    penaltylib/repetition_penalty.py cumulates output ids and nothing of the prompt), vLLM's the
    prompt too. A real SGLang sample's record states SGLang's convention, and the judge keeps
    to it: a position whose returned top holds prompt tokens but none of the sample's earlier
    output is rebuilt, those tokens' logprobs untouched (vLLM's convention would divide them
    and, with no log-sum-exp for their sign, could not); a position holding an earlier output
    token is not rebuilt under either, and says why."""
    record = json.loads(SGLANG_RECORD.read_text())
    sampling = Sampling.of(record)
    assert (sampling.repetition_scope, sampling.logit_order) == ("output", SGLANG)
    vllm = replace(sampling, repetition_scope="prompt+output")
    prompt = [int(t) for t in record["prompt_token_ids"]]
    positions = record["positions"]
    prompt_only = output_hit = 0
    for at, (position, context) in enumerate(
        zip(positions, sampling.contexts(prompt, positions), strict=True)
    ):
        top = dict((int(t), float(lp)) for t, lp in position["top"])
        earlier = {int(p["token"]) for p in positions[:at]}
        got = logits_of(position, sampling, context)
        if earlier & set(top):
            assert isinstance(got, Unrebuilt) and "log-sum-exp" in got.why, (at, got)
            output_hit += 1
        elif set(prompt) & set(top):
            assert not isinstance(got, Unrebuilt), (at, got)
            assert dict(got.known) == {t: lp for t, lp in top.items() if lp >= got.bound}
            assert isinstance(logits_of(position, vllm, context), Unrebuilt)
            prompt_only += 1
    assert prompt_only > 0 and output_hit > 0, (prompt_only, output_hit)
