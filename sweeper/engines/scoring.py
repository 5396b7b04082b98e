"""Scoring sampled outputs through an engine's own prefill: the requests each engine answers,
and reading their answers into `PositionScore` fields (`sweeper.results.scores`).

- bundled runtime: `POST /score` (the processed distribution itself: basis `exact`), sent every
  processor the output was drawn with (it takes the same fields as a request), with
  `top_logprobs` k: each position's top k as well (and, where it returns them, each position's
  `logsumexp` and the prompt's ids);
- vLLM: a completion of prompt + output as one token-id prompt, `max_tokens` 1, with
  `prompt_logprobs` k: per position the raw logprob and rank of the token there and the top k
  (basis `topk`; k up to the server's `--max-logprobs`, which the launch sets);
- SGLang: native `/generate` with `input_ids`, `return_logprob`, `logprob_start_len` at the
  prompt's last token and `top_logprobs_num` k: `meta_info.input_token_logprobs` and
  `input_top_logprobs`, one entry per token from that start, the first None (basis `topk`).
vLLM's and SGLang's routes are a prefill of prompt + output returning raw logprobs: the logit
processors are not sent there but rebuilt by the judge from the raw logprobs, the prompt's ids
(each adapter knows them and returns them with the score) and the output's prefix
(`sweeper.proof.scored.processors`). Which of them a server answers is probed after its proof
(`negotiate_scoring` of each engine); what each engine's code does is data in
`sweeper.proof.scored.catalog`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from sweeper.config import ServerConfig
from sweeper.engines.base import RequestSpec, Scored, ScoringError, ScoringPath
from sweeper.engines.capabilities import PROBE_TIMEOUT_S, error_message, processors_of
from sweeper.proof.scored.catalog import SCORING

#: vLLM's refusal of more logprobs than its limit names the limit.
_LIMIT = re.compile(r"max allowed: (\d+)")
#: Logprobs a little above 0 are rounding; above this they are logits (a logits mode).
_LOGPROB_SLACK = 1e-3


def not_asked(engine: str, server_config: ServerConfig) -> ScoringPath | None:
    """`none`, with why, for a speculative server whose engine's speculative servers do not
    score their own samples (the AR server does); None when it is to be asked."""
    scoring = SCORING.get(engine)
    if scoring is None:
        return "none", None, (), f"scoring: none ({engine} has no scoring path)"
    if server_config.mode == "speculative" and not scoring.self_scoring:
        return "none", None, (), f"scoring: by the AR server ({scoring.self_scoring_why})"
    return None


def post_json(
    client: httpx.Client, url: str, body: Mapping[str, Any], timeout: float = PROBE_TIMEOUT_S
) -> Any:
    """The JSON answer of one POST; ScoringError with the server's message otherwise."""
    try:
        resp = client.post(url, json=dict(body), timeout=timeout)
    except httpx.HTTPError as exc:
        raise ScoringError(f"{url}: {type(exc).__name__}: {exc}") from None
    if resp.status_code != 200:
        raise ScoringError(f"HTTP {resp.status_code}: {error_message(resp.text)}")
    try:
        return resp.json()
    except ValueError as exc:
        raise ScoringError(f"{url}: not JSON: {exc}") from None


def limit_of(message: str) -> int | None:
    """The logprob limit a refusal names (vLLM: "... greater than max allowed: 20")."""
    found = _LIMIT.search(message)
    return int(found.group(1)) if found else None


def _logprob(value: Any) -> float:
    number = float(value)
    if number > _LOGPROB_SLACK:
        raise ScoringError(
            f"a logprob of {number:.4g} > 0: the server returns logits, not logprobs (is its "
            "logprobs mode a logits one?)"
        )
    return min(number, 0.0) if math.isfinite(number) else -math.inf


def _top(pairs: Sequence[tuple[int, float]]) -> list[tuple[int, float]]:
    """(id, logprob) best first, ties by id."""
    return sorted(pairs, key=lambda pair: (-pair[1], pair[0]))


def vllm_positions(
    prompt_logprobs: Sequence[Any], prompt_len: int, continuation: Sequence[int], k: int
) -> list[dict[str, Any]]:
    """The output's positions of a vLLM completion's `prompt_logprobs` (one entry per prompt
    token, the first None; each a dict id -> {logprob, rank}: the top k, plus the token there
    when it is not among them)."""
    entries = list(prompt_logprobs)[prompt_len : prompt_len + len(continuation)]
    if len(entries) != len(continuation):
        raise ScoringError(
            f"prompt_logprobs has {len(prompt_logprobs)} entries for a prompt of "
            f"{prompt_len} + {len(continuation)} tokens"
        )
    out = []
    for token, entry in zip(continuation, entries, strict=True):
        if not isinstance(entry, Mapping) or str(token) not in entry:
            raise ScoringError(f"prompt_logprobs names no logprob for token {token}")
        own = entry[str(token)]
        top = [(int(i), _logprob(v["logprob"])) for i, v in entry.items()]
        if len(entry) > k:  # the token is outside the top k: vLLM added it
            top = [pair for pair in top if pair[0] != token]
        out.append(
            {
                "token": int(token),
                "logprob": _logprob(own["logprob"]),
                "rank": int(own["rank"]) if own.get("rank") is not None else None,
                "top": _top(top)[:k],
            }
        )
    return out


def sglang_positions(
    meta: Mapping[str, Any], continuation: Sequence[int], k: int
) -> list[dict[str, Any]]:
    """The output's positions of a `/generate` answer's `meta_info`: `input_token_logprobs`
    [logprob, id, text] and `input_top_logprobs` (a list of [logprob, id, text] per position)
    from the prompt's last token on (its entry None), which must end with the output's own
    tokens, each with a logprob."""
    tokens = list(meta.get("input_token_logprobs") or [])
    tops = list(meta.get("input_top_logprobs") or [])
    ids = [int(t[1]) for t in tokens if t]
    if ids[-len(continuation) :] != list(continuation) or len(tops) != len(tokens):
        raise ScoringError(
            f"input_token_logprobs names tokens {ids[:8]}... for an output starting "
            f"{list(continuation[:8])}: not the output's positions"
        )
    start = len(tokens) - len(continuation)
    out = []
    for token, own, top in zip(continuation, tokens[start:], tops[start:], strict=True):
        if own[0] is None:
            raise ScoringError(f"no input logprob for output token {token}")
        pairs = [(int(t[1]), _logprob(t[0])) for t in (top or [])]
        ranked = _top(pairs)[:k]
        above = sum(1 for _, lp in ranked if lp > float(own[0]))
        inside = any(i == token for i, _ in ranked)
        out.append(
            {
                "token": int(token),
                "logprob": _logprob(own[0]),
                # The rank is known only inside the top k (SGLang reports none).
                "rank": above + 1 if inside else None,
                "top": ranked,
            }
        )
    return out


def exact_positions(
    answer: Mapping[str, Any], continuation: Sequence[int], prompt: Sequence[int] | None
) -> Scored:
    """The bundled runtime's `/score` answer (`prompt`: the ids sent, where sent as ids; the
    answer's own `prompt_token_ids` where it states them)."""
    positions = list(answer.get("positions") or [])
    if [int(p.get("token", -1)) for p in positions] != list(continuation):
        raise ScoringError("/score answered other tokens than the output's")
    order = tuple(str(step) for step in answer.get("order") or ())
    tops = [p.get("top") or [] for p in positions]
    if not all(isinstance(top, list) and all(_is_pair(t) for t in top) for top in tops):
        raise ScoringError("/score answered a `top` that is not a list of [id, logprob] pairs")
    k = min((len(top) for top in tops), default=0)
    stated = answer.get("prompt_token_ids")
    ids = stated if isinstance(stated, list) else prompt
    prompt_ids = tuple(int(t) for t in ids) if ids is not None else None
    return Scored("exact", order, k or None, [dict(p) for p in positions], prompt_ids)


def _is_pair(item: Any) -> bool:
    return (
        isinstance(item, list)
        and len(item) == 2
        and isinstance(item[0], int)
        and isinstance(item[1], int | float)
    )


def score_fields(spec: RequestSpec) -> dict[str, Any]:
    """The processors a score is computed under, as a request sends them: every one the output
    was drawn with (logit bias keyed by token-id strings, a response format as its object)."""
    out = processors_of(spec)
    if "logit_bias" in out:
        out["logit_bias"] = {str(token): bias for token, bias in dict(out["logit_bias"]).items()}
    if isinstance(out.get("response_format"), str):
        out["response_format"] = json.loads(out["response_format"])
    return {
        "temperature": spec.temperature,
        "top_p": 1.0 if spec.top_p is None else spec.top_p,
        "top_k": 0 if spec.top_k is None else spec.top_k,
        **out,
    }
