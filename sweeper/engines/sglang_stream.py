"""Reading SGLang's streams: its OpenAI extensions and its native streamed `/generate`.

OpenAI routes: completions chunks carry `token_ids` (`return_token_ids`, SGLang >= PR #30917);
a chat stream carries its ids once, in a final `sglext.output_ids` chunk
(`return_output_ids_in_sglext`, PR #34488); both carry acceptance in
`sglext.spec_tokens_details` (PR #33518).

Native `/generate` (every build since late 2025, PR #29907's included): each event is
`{"text", "output_ids", "meta_info"}`. `output_ids` is cumulative by default and a delta under
`--incremental-streaming-output`; `meta_info.completion_tokens` (in every event) tells which:
an event whose ids are as many as the completion so far is cumulative. Text follows the same
rule (a cumulative intermediate event may carry `text: null`). The final event's `meta_info`
carries acceptance: `spec_verify_ct`, `spec_accept_length` (tokens per verify step, bonus
included: tau), the correct-drafts counts and histogram under either spelling
(`spec_num_correct_drafts` / `spec_accepted_drafts`, `spec_num_proposed_drafts` /
`spec_proposed_drafts`, `spec_correct_drafts_histogram` / `spec_accept_histogram`: PR #29907's
build uses both). Logprobs (AR servers only): `output_top_logprobs`, one list of
`[logprob, token_id, text]` per token, cumulative or sliced like the ids.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from sweeper.config.features import used
from sweeper.engines.base import RequestSpec
from sweeper.engines.stream import ChunkReader

#: meta_info spellings of the same figure across builds (first found wins).
CORRECT_DRAFTS = ("spec_num_correct_drafts", "spec_accepted_drafts")
PROPOSED_DRAFTS = ("spec_num_proposed_drafts", "spec_proposed_drafts")
HISTOGRAM = ("spec_correct_drafts_histogram", "spec_accept_histogram")
GENERATE_PATH = "/generate"


def generate_body(spec: RequestSpec, prompt: list[int] | str, *, margins: bool) -> dict[str, Any]:
    """A streamed `/generate` body: the prompt's token ids (or its text), the sampling params
    every build since 0.5 knows (0.5.23 answers 400 to an unknown one), and top-2 logprobs
    only where `margins` (an AR server at temperature 0). It writes no request feature
    (`sweeper.config.features`) yet: one asked raises LookupError, never silently dropped."""
    asked = [feature.name for feature, _ in used(spec.feature_values())]
    if asked:
        raise LookupError(f"SGLang's native /generate body writes no {', '.join(asked)} yet")
    sampling: dict[str, Any] = {"max_new_tokens": spec.max_tokens, "temperature": spec.temperature}
    if spec.top_p is not None:
        sampling["top_p"] = spec.top_p
    if spec.top_k is not None:
        sampling["top_k"] = spec.top_k
    if spec.ignore_eos:
        sampling["ignore_eos"] = True
    if spec.min_tokens:
        sampling["min_new_tokens"] = spec.min_tokens
    if spec.seed is not None and spec.temperature > 0:
        sampling["sampling_seed"] = spec.seed
    body: dict[str, Any] = {"sampling_params": sampling, "stream": True}
    body["input_ids" if isinstance(prompt, list) else "text"] = prompt
    if margins and spec.temperature == 0:
        body.update(return_logprob=True, top_logprobs_num=2, logprob_start_len=-1)
    return body


def _first(meta: Mapping[str, Any], names: tuple[str, ...]) -> Any:
    return next((meta[n] for n in names if meta.get(n) is not None), None)


def _margins(tops: list[Any]) -> list[float]:
    out = []
    for entry in tops:
        values = sorted((float(t[0]) for t in entry or [] if t and t[0] is not None), reverse=True)
        out.append(values[0] - values[1] if len(values) >= 2 else math.nan)
    return out


class SGLangReader(ChunkReader):
    """Reads ids from completions chunks, a chat stream's final `sglext` chunk, or native
    `/generate` events, and the acceptance figures SGLang puts beside them."""

    def __init__(self, chat: bool) -> None:
        super().__init__(chat)
        #: Set when the stream was the native one (then `ids_source` is "native").
        self.native = False
        #: How the native stream sent ids: "cumulative" or "incremental" (None: not native).
        self.streaming: str | None = None

    def feed(self, chunk: Mapping[str, Any]) -> bool:
        if "meta_info" in chunk or "output_ids" in chunk:
            return self.feed_native(chunk)
        return super().feed(chunk)

    def feed_native(self, event: Mapping[str, Any]) -> bool:
        """One `/generate` event; True when it brought new tokens."""
        self.native = True
        self.ids_source = "native"
        meta = event.get("meta_info") or {}
        ids = [int(t) for t in event.get("output_ids") or []]
        total = meta.get("completion_tokens")
        before = len(self.token_ids)
        cumulative = total is None or len(ids) == int(total)
        if cumulative and (before == 0 or len(ids) >= before):
            # A cumulative event (or the first event, which reads the same either way).
            if before and self.streaming is None:
                self.streaming = "cumulative"
            self.token_ids = ids
            if event.get("text") is not None:
                self.texts = [str(event["text"])]
            tops = meta.get("output_top_logprobs")
            if tops is not None:
                self.margins = _margins(tops)
        else:
            self.streaming = "incremental"
            self.token_ids.extend(ids)
            if event.get("text"):
                self.texts.append(str(event["text"]))
            self.margins.extend(_margins(meta.get("output_top_logprobs") or []))
        self.saw_ids = self.saw_ids or bool(self.token_ids)
        if total is not None:
            self.usage = {"completion_tokens": int(total)}
            if meta.get("prompt_tokens") is not None:
                self.usage["prompt_tokens"] = int(meta["prompt_tokens"])
        finish = meta.get("finish_reason")
        if isinstance(finish, Mapping):
            self.finish_reason = str(finish.get("type") or "") or self.finish_reason
        elif finish:
            self.finish_reason = str(finish)
        self._read_meta_acceptance(meta)
        return len(self.token_ids) > before

    def _read_meta_acceptance(self, meta: Mapping[str, Any]) -> None:
        verify = meta.get("spec_verify_ct")
        if not verify:
            return
        histogram = _first(meta, HISTOGRAM)
        self.acceptance = {
            "tau": meta.get("spec_accept_length"),
            "verify_rounds": verify,
            "accepted_hist": [int(n) for n in histogram] if histogram else None,
            "correct_drafts": _first(meta, CORRECT_DRAFTS),
            "proposed_drafts": _first(meta, PROPOSED_DRAFTS),
        }

    def read_extension(self, chunk: Mapping[str, Any]) -> None:
        sglext = chunk.get("sglext") or {}
        ids = sglext.get("output_ids")
        if ids and not self.saw_ids:
            # Arrives once, after the finish chunk: the whole output of choice 0.
            self.token_ids = [int(t) for t in ids[0]]
            self.saw_ids = True
        details = sglext.get("spec_tokens_details")
        if isinstance(details, list):
            details = details[0] if details else None
        if details and details.get("spec_verify_ct"):
            # Of the exposure columns SGLang reports only the accepted-length histogram
            # (drafts accepted per verify step, bonus excluded: our accepted_hist); padding,
            # graph replay, batching and tree shapes stay unknown.
            histogram = _first(details, HISTOGRAM)
            self.acceptance = {
                "tau": details.get("spec_accept_length"),
                "verify_rounds": details.get("spec_verify_ct"),
                "accepted_hist": [int(n) for n in histogram] if histogram else None,
            }
