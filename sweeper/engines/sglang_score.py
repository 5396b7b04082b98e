"""Scoring sampled outputs on SGLang: native `/generate` over prompt + output as `input_ids`,
`return_logprob`, `logprob_start_len` at the prompt's last token (SGLang's entry at the start is
None: the output's first logprob comes next), `top_logprobs_num` k, one new token at temperature
0 (`sweeper.engines.scoring`). Input-token logprobs are the raw
log-softmax on 0.5.15, 0.5.23 and PR #29907's branch (`sweeper.proof.scored.catalog`). Only an AR
server is asked: a speculative one's samples are scored by the AR server, started again after
the speculative configs (PR #29907's scheduler refuses logprobs on DDTREE requests).

The prompt's ids are the ones the sample was sent with: the native path's (from `/tokenize` or
the chat route, fetched once per run and shared by every server), else `/tokenize`'s for a
prompt an OpenAI route took as text.
"""

from __future__ import annotations

from typing import Any, Protocol

import httpx

from sweeper.config import ServerConfig
from sweeper.engines.base import RequestSpec, Scored, ScoringError, ScoringPath
from sweeper.engines.capabilities import Capabilities
from sweeper.engines.scoring import not_asked, post_json, sglang_positions
from sweeper.engines.sglang_negotiate import PROMPT_IDS_AT, tokenize
from sweeper.engines.sglang_stream import GENERATE_PATH
from sweeper.proof.scored.catalog import SCORING
from sweeper.results.manifest import PROMPT_CHAT_ROUTE, PROMPT_TOKENIZE

ENGINE = "sglang"


class _Engine(Protocol):
    capabilities: Capabilities | None

    def prompt_ids(self, spec: RequestSpec, model: str | None, base_url: str) -> list[int]: ...


def negotiate_scoring(
    engine: _Engine,
    client: httpx.Client,
    base_url: str,
    server_config: ServerConfig,
    model: str | None,
    version: str | None,
) -> ScoringPath:
    """`topk` when the server answers input-token logprobs (module docstring), else `none`."""
    skipped = not_asked(ENGINE, server_config)
    if skipped is not None:
        return skipped
    scoring = SCORING[ENGINE]
    k = scoring.top_k or 1
    probe = RequestSpec("probe", "", 1, 0.0, prompt_token_ids=(0, 1, 2))
    try:
        score(engine, client, base_url, probe, [3], model, k)
    except ScoringError as exc:
        return "none", None, (), f"scoring: none ({GENERATE_PATH} input logprobs: {exc})"
    order = scoring.order(version)
    return "topk", k, order, f"scoring: {GENERATE_PATH} input logprobs, top {k}"


def score(
    engine: _Engine,
    client: httpx.Client,
    base_url: str,
    spec: RequestSpec,
    continuation: list[int],
    model: str | None,
    k: int | None = None,
) -> Scored:
    """`continuation` scored by this server's prefill (module docstring)."""
    caps = engine.capabilities
    k = k or (caps.scoring_k if caps is not None else None) or SCORING[ENGINE].top_k or 1
    prompt = _prompt(engine, client, base_url, spec, model)
    body: dict[str, Any] = {
        "input_ids": [*prompt, *continuation],
        "sampling_params": {"max_new_tokens": 1, "temperature": 0.0},
        "return_logprob": True,
        # SGLang gives no logprob for the token at logprob_start_len itself (its entry is
        # None): start one before the output, at the prompt's last token.
        "logprob_start_len": len(prompt) - 1,
        "top_logprobs_num": k,
        "stream": False,
    }
    answer = post_json(client, base_url + GENERATE_PATH, body)
    answer = answer[0] if isinstance(answer, list) and answer else answer
    meta = answer.get("meta_info") if isinstance(answer, dict) else None
    if not isinstance(meta, dict):
        raise ScoringError(f"{GENERATE_PATH} answered no meta_info")
    order = caps.scoring_order if caps is not None else ()
    positions = sglang_positions(meta, continuation, k)
    return Scored("topk", tuple(order), k, positions, tuple(prompt))


def _prompt(
    engine: _Engine, client: httpx.Client, base_url: str, spec: RequestSpec, model: str | None
) -> list[int]:
    if spec.prompt_token_ids is not None:
        return list(spec.prompt_token_ids)
    caps = engine.capabilities
    details = caps.details if caps is not None else {}
    if details.get("prompt") in (PROMPT_TOKENIZE, PROMPT_CHAT_ROUTE) and details.get(PROMPT_IDS_AT):
        return engine.prompt_ids(spec, model, str(details[PROMPT_IDS_AT]))
    ids = tokenize(client, base_url, spec, model)
    if not ids:
        raise ScoringError(
            "no token ids for the prompt (the build has no /tokenize): its outputs cannot be scored"
        )
    return ids
