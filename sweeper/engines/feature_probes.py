"""Probes that prove a running server honours the request features a config asks, or refuse
them in one line naming engine, build and parameter (`sweeper.catalog.features` says which
builds should; a fork or an unlisted build may not, and a server that drops a field answers
200 all the same).

Each probe is one or two short requests through the engine's own request writer, so the body
the measured requests carry is the one probed:
- any feature: the server must answer 200 (a 400 or 500 is the build refusing it; vLLM 0.32
  answers 400 to min-p or logit bias on a speculative server);
- `logit_bias`: +100 on one of the asked tokens at temperature 0 must emit only that token
  (vLLM #42744: a verifier that skips the bias emits drafted tokens unbiased);
- `min_p`: min-p 1 at temperature 1 keeps only the top token, so the sample must be the greedy
  output (a verifier that skips min-p accepts drafted tokens below the cut);
- `regex`: `(yes|no)` must be the whole output (a misspelt field is dropped silently: vLLM
  0.32 ignores `guided_regex`);
- `response_format`: a one-key schema must come back as that JSON object;
- `stop`: a stop string cut from the greedy output's second third must end it early (a prefix
  of the greedy ids);
- `logprobs`: asking them must not change the greedy ids.
Penalties and `n` are checked for acceptance only (their effect needs an AR reference: the
proof's). Probes run at temperature 0 except min-p's and n's (vLLM zeroes min-p and refuses
n > 1 when greedy).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import httpx

from sweeper.config.features import BY_NAME
from sweeper.engines.base import RequestSpec
from sweeper.engines.capabilities import ProbeResult, probe

#: The regex probe: an output it fully matches is one the mask allowed.
PROBE_REGEX = "(yes|no)"
#: The response-format probe: one boolean key, no other.
PROBE_FORMAT = {
    "type": "json_schema",
    "json_schema": {
        "name": "probe",
        "schema": {
            "type": "object",
            "properties": {"ok": {"type": "boolean"}},
            "required": ["ok"],
            "additionalProperties": False,
        },
    },
}
#: Output tokens of a probe (the JSON probe needs a few more).
PROBE_TOKENS = 8
JSON_TOKENS = 24
#: The seed of the sampled probes (min-p, n).
PROBE_SEED = 1


def _frozen(name: str, value: Any) -> Any:
    return BY_NAME[name].freeze(value)


def _send(
    engine: Any, client: httpx.Client, base_url: str, spec: RequestSpec, model: str | None
) -> ProbeResult:
    request = engine.request(spec, model)
    return probe(client, base_url, request, engine.reader(spec))


def _said(result: ProbeResult) -> str:
    # A streamed request is refused in an error event after HTTP 200 (vLLM).
    status = {None: "no answer", 200: "an error event"}.get(result.status, f"HTTP {result.status}")
    return f"{status}: {result.error}"


def probe_features(
    engine: Any,
    client: httpx.Client,
    base_url: str,
    base: RequestSpec,
    wanted: Mapping[str, Any],
    model: str | None,
    named: str,
) -> tuple[str | None, list[str]]:
    """(the refusal of the first feature of `wanted` (name -> frozen value) this server drops,
    in one line starting with `named` (`vllm 0.32.0 (speculative)`), or None; the evidence of
    each probe). `engine` is bound to the negotiated paths; `base` is the probe request (the
    workload's first prompt) without features."""
    base = replace(base, temperature=0.0, seed=None, top_p=None, top_k=None, sample_margins=False)
    unused: dict[str, Any] = dict.fromkeys(BY_NAME)
    base = replace(base, max_tokens=PROBE_TOKENS, **unused)
    evidence: list[str] = []
    greedy: list[ProbeResult] = []

    def greedy_answer() -> ProbeResult:
        if not greedy:
            greedy.append(_send(engine, client, base_url, base, model))
        return greedy[0]

    for name, value in wanted.items():
        spec = _probe_spec(base, name, value)
        try:
            result = _send(engine, client, base_url, spec, model)
        except LookupError as exc:  # the negotiated path has no spelling for it
            return f"{named} refuses {name} on its negotiated path: {exc}", evidence
        if not result.ok or result.reader is None:
            return f"{named} refuses {name}: {_said(result)}", evidence
        ids, text = list(result.reader.token_ids), result.reader.text
        wrong = _check(name, spec, ids, text, greedy_answer)
        if wrong is None and name == "stop":
            wrong = _check_stop(engine, client, base_url, base, model, greedy_answer())
        if wrong is not None:
            return f"{named} ignores {name}: {wrong}", evidence
        evidence.append(f"{name}: honoured ({_honoured[name]})")
    return None, evidence


_honoured = {
    "min_p": "min-p 1 at T=1 gave the greedy ids",
    "repetition_penalty": "accepted",
    "frequency_penalty": "accepted",
    "presence_penalty": "accepted",
    "logit_bias": "+100 on a token emitted only it",
    "stop": "a stop string from the greedy output ended it early, at the same ids",
    "response_format": "a one-key schema came back as that object",
    "regex": f"{PROBE_REGEX} was the whole output",
    "n": "accepted at T=1",
    "logprobs": "the greedy ids unchanged",
}


def _probe_spec(base: RequestSpec, name: str, value: Any) -> RequestSpec:
    """The probe request for one feature (module docstring)."""
    if name == "logit_bias":
        token = max(value, key=lambda pair: pair[1])[0]
        return replace(base, logit_bias=_frozen(name, {token: 100.0}))
    if name == "min_p":
        return replace(base, temperature=1.0, seed=PROBE_SEED, min_p=1.0)
    if name == "regex":
        return replace(base, regex=PROBE_REGEX)
    if name == "response_format":
        return replace(base, max_tokens=JSON_TOKENS, response_format=_frozen(name, PROBE_FORMAT))
    if name == "n":
        return replace(base, temperature=1.0, seed=PROBE_SEED, n=value)
    return replace(base, **{name: value})


def _check(
    name: str, spec: RequestSpec, ids: list[int], text: str, greedy_answer: Any
) -> str | None:
    """Why the answer shows the feature dropped, or None (`greedy_answer()`: the probe
    request's greedy answer without features, sent once when first needed)."""
    if name == "logit_bias":
        token = spec.logit_bias[0][0] if spec.logit_bias else None
        if not ids or any(t != token for t in ids):
            return f"+100 on token {token} at T=0 emitted {ids}"
    elif name in ("min_p", "logprobs"):
        answer = greedy_answer()
        if not answer.ok or answer.reader is None:
            return f"the greedy probe failed ({_said(answer)})"
        want = list(answer.reader.token_ids)
        if ids != want:
            how = "min-p 1 at T=1 sampled" if name == "min_p" else f"logprobs {spec.logprobs} gave"
            return f"{how} {ids}, greedy gave {want}"
    elif name == "regex":
        if text.strip() not in ("yes", "no") or text != text.strip():
            return f"regex {PROBE_REGEX!r} gave {text!r}"
    elif name == "response_format":
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if not (isinstance(data, dict) and set(data) == {"ok"} and isinstance(data["ok"], bool)):
            return f"a schema of one boolean key 'ok' gave {text!r}"
    return None


def _check_stop(
    engine: Any,
    client: httpx.Client,
    base_url: str,
    base: RequestSpec,
    model: str | None,
    greedy: ProbeResult,
) -> str | None:
    """A stop string cut from the greedy output's second third must end it early: its ids a
    proper prefix of the greedy ids."""
    if not greedy.ok or greedy.reader is None:
        return f"the greedy probe failed ({_said(greedy)})"
    text = greedy.reader.text
    cut = text[len(text) // 3 :].strip()[:2]  # early enough that tokens follow it
    if not cut:
        return None  # nothing to cut on (an empty answer): acceptance is all that was shown
    stopped = _send(engine, client, base_url, replace(base, stop=(cut,)), model)
    if not stopped.ok or stopped.reader is None:
        return f"stop {cut!r}: {_said(stopped)}"
    # Ids, not text: engines differ in whether a stream's text keeps the stop string (SGLang's
    # native stream does), never in where generation ends.
    ids, full = list(stopped.reader.token_ids), list(greedy.reader.token_ids)
    if not (len(ids) < len(full) and ids == full[: len(ids)]):
        return f"stop {cut!r} (in {text!r}) gave ids {ids}, the greedy ids {full}"
    return None
