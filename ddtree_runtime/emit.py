"""Per-request output: tokens are emitted one by one through the same EOS / stop / max_tokens rules.

DDTree may accept several tokens in one round; pushing them through ``Emitter.push`` one at a time
makes generation end exactly where autoregressive decoding would. Text deltas hold back a suffix
that could still become a stop string, and an incomplete UTF-8 sequence. Emitted tokens' logprobs
(`token_logprobs`) and, when sampled, their sample margins (`emitted_sample_margins`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from ddtree_runtime.algo.sampling import processed_probs, sample_margins, uniform
from ddtree_runtime.params import SamplingParams, TokenLogprob


@dataclass
class Emitter:
    tokenizer: Any
    eos_token_ids: list[int]
    max_tokens: int
    stop: list[str] = field(default_factory=list)
    #: EOS never ends generation; and before `min_tokens` tokens, neither EOS nor a stop does.
    ignore_eos: bool = False
    min_tokens: int = 0
    #: Stop strings are looked for from here on: text before `min_tokens` cannot stop it.
    stop_from: int = 0
    token_ids: list[int] = field(default_factory=list)
    text: str = ""  # final visible text so far (stop string excluded)
    sent: int = 0  # characters of `text` already returned as deltas
    finish_reason: str | None = None

    def push(self, token_id: int, stop_strings: bool = True) -> bool:
        """Add one generated token; True when generation is finished (then stop pushing).
        `stop_strings` False skips looking for stop strings at this token (only the planted
        fault ``stop_round_end`` does, looking at a round's last token alone)."""
        self.token_ids.append(token_id)
        may_stop = len(self.token_ids) >= self.min_tokens
        if token_id in self.eos_token_ids and may_stop and not self.ignore_eos:
            self.finish_reason = "stop"
            return True
        full = self.tokenizer.decode(
            [t for t in self.token_ids if t not in self.eos_token_ids], skip_special_tokens=True
        )
        if not may_stop:
            self.stop_from = len(full)
        found = (full.find(s, self.stop_from) for s in self.stop if s and stop_strings)
        cut = min((i for i in found if i >= 0), default=-1)
        if cut >= 0:
            self.text = full[:cut]
            self.finish_reason = "stop"
            return True
        self.text = full
        if len(self.token_ids) >= self.max_tokens:
            self.finish_reason = "length"
            return True
        return False

    def delta(self) -> str:
        """New text safe to send now; everything once finished."""
        end = len(self.text)
        if self.finish_reason is None:
            if self.text.endswith("\ufffd"):
                end -= 1  # an incomplete multi-byte character: wait for the rest
            visible = self.text[:end]
            hold = max(
                (n for s in self.stop for n in range(1, len(s)) if visible.endswith(s[:n])),
                default=0,
            )
            end -= hold
        end = max(end, self.sent)
        out = self.text[self.sent : end]
        self.sent = end
        return out


def token_logprobs(logits: torch.Tensor, tokens: list[int], top_n: int) -> list[TokenLogprob]:
    """Raw log-softmax of the target at each emitting node (rows of `logits`), plus top-n."""
    lsm = torch.log_softmax(logits.double(), dim=-1)
    top_n = min(top_n, lsm.shape[-1])
    top = lsm.topk(top_n, dim=-1) if top_n else None
    out = []
    for j, t in enumerate(tokens):
        alts = (
            list(zip(top.indices[j].tolist(), top.values[j].tolist(), strict=True))
            if top is not None
            else []
        )
        out.append(TokenLogprob(t, float(lsm[j, t]), alts))
    return out


def emitted_sample_margins(
    params: SamplingParams, seed: int, rows: torch.Tensor, tokens: list[int], prefix: int
) -> list[float]:
    """Sample margins of a sampled request's tokens emitted in one round, under the request's own
    distribution: emitted token j comes from the depth-j node of the accepted path (`rows` are its
    logits), which predicts position prefix + 1 + j, so it gets the u AR uses there (as in
    ``Engine._row_sampling``). An AR round emits one token, at depth 0."""
    probs = processed_probs(rows, params.temperature, params.top_k, params.top_p, params.min_p)
    u = [uniform(seed, prefix + 1 + j) for j in range(len(tokens))]
    margins = sample_margins(
        probs,
        torch.tensor(u, dtype=torch.float64, device=rows.device),
        torch.tensor(tokens, dtype=torch.long, device=rows.device),
    )
    return [float(m) for m in margins.tolist()]
