"""The DDTree engine: request state, continuous batching and the draft-tree-verify-commit step.

Threading: one engine thread calls ``step()``; ``add_request``, ``abort`` and ``stats`` may be
called from any thread (an internal ``threading.Lock`` guards the queues; new requests and aborts
take effect at the start of the next step).

Invariant per request: the cache holds tokens[0:len-1]; the last token is the pending root. A step
drafts, builds one padded tree per request, writes their mask, verifies all trees in one forward,
commits the accepted path's KV and emits the accepted tokens + bonus through the AR stopping rules.
Every node chooses from its processed logits: the request's logits processors (logit bias,
penalties: ``algo.processors``) read the tokens before the round and the node's own drafted path.
An AR server (budget 0, or speculative "none") is plain AR through the same forward, cache and
sampling, but its rows get the causal decode mask (``fill_decode_mask``), never the tree mask:
it is the reference DDTree is judged against, so it must not share the code under test.
The one lossy setting, ``accept_threshold`` below 1, changes sampled rows' choices before the walk
(``algo.verify.relaxed_choices``); at 1, the default, every output is AR's.

The verify width (query length) is fixed at 1 + budget whenever ``cuda_graph`` is requested, as a
captured graph needs, also where no graph is captured (CPU, feature drafters): a lone request's
smaller tree is then padded exactly as on a GPU. Otherwise it is trimmed each round to 1 + the
largest tree in the batch, so only requests batched with a larger tree carry padding rows. Each
request's stats record which of these paths its rounds took (``stats.RequestStats``).

A drafter with a ``feature_layers`` attribute (DFlash) conditions on the target's hidden states:
the engine then keeps, per request, the selected layers' outputs for exactly the cached tokens
(prefill, then the accepted path of every verify, the same rows the KV commit keeps) and passes
them to ``propose``. Other drafters cost nothing extra.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from ddtree_runtime.algo import mask as mask_module
from ddtree_runtime.algo.cache import SlotCache
from ddtree_runtime.algo.commit import kept_nodes, kv_moves
from ddtree_runtime.algo.mask import fill_decode_mask, fill_tree_mask
from ddtree_runtime.algo.processors import PROCESSOR_FAULTS, History, tree_logits
from ddtree_runtime.algo.sampling import uniform
from ddtree_runtime.algo.tree import TreeBatch, build_tree, tree_extent
from ddtree_runtime.algo.verify import (
    DRAFT_SAMPLING_FAULTS,
    RowSampling,
    Verdict,
    blind_tree,
    redrawn_drafted_choices,
    relaxed_choices,
    target_choices,
    unverified_choices,
    walk,
)
from ddtree_runtime.drafters import Drafter
from ddtree_runtime.emit import Emitter, emitted_sample_margins, token_logprobs
from ddtree_runtime.forward import VerifyForward
from ddtree_runtime.models import LoadedModel
from ddtree_runtime.params import (
    EngineConfig,
    GenerationResult,
    RequestLimits,
    SamplingParams,
    TokenEvent,
    TokenLogprob,
)
from ddtree_runtime.stats import RequestStats, RoundShape, StageClock

if TYPE_CHECKING:  # xgrammar is imported only once a request asks for a grammar (pyproject)
    from ddtree_runtime.algo.grammar import Grammars, RequestGrammar

FINISHED_STATS_KEPT = 10_000

__all__ = [
    "Engine",
    "EngineConfig",
    "GenerationResult",
    "RequestStats",
    "SamplingParams",
    "TokenEvent",
    "TokenLogprob",
]


@dataclass
class _Request:
    rid: str
    tokens: list[int]
    params: SamplingParams
    emitter: Emitter
    seed: int
    budget: int
    topk: int
    prompt_len: int
    stats: RequestStats = field(default_factory=RequestStats)
    hidden: torch.Tensor | None = None  # target features of tokens[0:len-1] (feature drafters)
    grammar: RequestGrammar | None = None  # structured output: the state after emitted tokens


class Engine:
    def __init__(self, loaded: LoadedModel, drafter: Drafter, config: EngineConfig) -> None:
        self.loaded, self.drafter, self.config = loaded, drafter, config
        self.model = loaded.model
        self.device = loaded.device
        self.budget = config.budget if config.speculative == "ddtree" else 0
        self.q_len = 1 + self.budget
        self.depth = config.block_size - 1
        self.max_len = config.max_model_len + self.q_len
        n_layers = int(self.model.config.num_hidden_layers)
        self.cache = SlotCache(n_layers, config.max_batch, self.max_len)
        self.forward = VerifyForward(self.model, self.cache, config, self.q_len, self.max_len)
        # cuda_graph holds every verify at the width a captured graph needs, graph or not (on
        # CPU there is none): then a lone request's small tree is padded as it would be on a GPU.
        self.fixed_shape = bool(config.cuda_graph)
        layers = getattr(drafter, "feature_layers", None)
        self.wants_features = layers is not None
        if layers is not None:
            if not all(0 <= i < n_layers for i in layers):
                raise ValueError(
                    f"drafter needs target layers {list(layers)} but the target has {n_layers}"
                )
            self.forward.want_features(list(layers))
        self.info: dict = {
            "cuda_graph_applied": self.forward.graph_enabled,
            "cuda_graph_reason": self.forward.graph_reason,
            "fixed_verify_shape": self.q_len if self.fixed_shape else None,
            "q_len": self.q_len,
            "max_len": self.max_len,
        }
        self.limits = RequestLimits(
            max_model_len=config.max_model_len,
            budget=self.budget,
            topk=config.topk,
            vocab_size=int(self.model.config.vocab_size),
        )
        self._lock = threading.Lock()
        self._waiting: list[_Request] = []
        self._aborts: set[str] = set()
        self._active: list[_Request] = []  # index == cache slot
        self._finished: OrderedDict[str, RequestStats] = OrderedDict()
        self._counter = 0
        self._grammars: Grammars | None = None  # made by the first request with a grammar
        self.pad_token = 0  # token id on padding nodes (tests set it to the target's choice)

    # ---- requests (any thread) -------------------------------------------------------------
    def add_request(self, request_id: str, prompt_ids: list[int], params: SamplingParams) -> None:
        """Queue a request; ValueError (a client error) when its parameters cannot run here."""
        budget, topk = params.check(prompt_ids, self.limits)
        grammar = self.request_grammar(params.response_format, params.regex)
        with self._lock:
            if request_id in self._finished or any(
                r.rid == request_id for r in (*self._waiting, *self._active)
            ):
                raise ValueError(f"duplicate request id {request_id!r}")
            self._counter += 1
            default_seed = self.config.seed * 1_000_003 + self._counter
            seed = params.seed if params.seed is not None else default_seed
            emitter = Emitter(
                self.loaded.tokenizer,
                self.loaded.eos_token_ids,
                params.max_tokens,
                list(params.stop),
                ignore_eos=params.ignore_eos,
                min_tokens=params.min_tokens,
            )
            request = _Request(
                request_id, list(prompt_ids), params, emitter, seed, budget, topk, len(prompt_ids)
            )
            request.grammar = grammar
            request.stats.accepted_hist = [0] * (1 + self.depth)
            self._waiting.append(request)

    def request_grammar(self, response_format: Any, regex: Any) -> RequestGrammar | None:
        """A fresh matcher for a request's grammar (`algo.grammar.grammar_key` reads the two
        fields), None when it asks for none; ValueError (a client error) for a shape, schema or
        regex it cannot take, or where xgrammar is not installed. Any thread."""
        if response_format is None and regex is None:
            return None
        try:
            from ddtree_runtime.algo import grammar
        except ImportError as error:
            raise ValueError(
                "structured output needs xgrammar on the server: "
                "pip install --no-deps xgrammar==0.2.8 apache-tvm-ffi==0.1.15.post2"
            ) from error
        key = grammar.grammar_key(response_format, regex)
        if key is None:
            return None
        with self._lock:
            if self._grammars is None:
                vocab = self.limits.vocab_size
                tokenizer, eos = self.loaded.tokenizer, self.loaded.eos_token_ids
                self._grammars = grammar.Grammars(tokenizer, vocab, eos)
            grammars = self._grammars
        return grammars.request(key)

    def abort(self, request_id: str) -> None:
        with self._lock:
            self._aborts.add(request_id)

    def has_work(self) -> bool:
        with self._lock:
            return bool(self._waiting or self._active)

    def stats(self, request_id: str) -> RequestStats:
        """Stats of a live or finished request (finished ones are kept until ``pop_stats``)."""
        with self._lock:
            if request_id in self._finished:
                return self._finished[request_id]
            for r in (*self._active, *self._waiting):
                if r.rid == request_id:
                    return r.stats
        raise KeyError(request_id)

    def pop_stats(self, request_id: str) -> RequestStats:
        with self._lock:
            return self._finished.pop(request_id)

    # ---- the step (engine thread) ----------------------------------------------------------
    @torch.inference_mode()
    def step(self) -> list[TokenEvent]:
        with self._lock:
            aborts, self._aborts = self._aborts, set()
            self._waiting = [r for r in self._waiting if r.rid not in aborts]
            admitted: list[_Request] = []
            while self._waiting and len(self._active) + len(admitted) < self.config.max_batch:
                admitted.append(self._waiting.pop(0))
        for slot in sorted(
            (i for i, r in enumerate(self._active) if r.rid in aborts), reverse=True
        ):
            self._release(slot)
        for r in admitted:
            self._active.append(r)
            r.hidden = self.forward.prefill(len(self._active) - 1, r.tokens[:-1])
        if not self._active:
            return []
        return self._verify_round()

    def _verify_round(self) -> list[TokenEvent]:
        """One round for every active request: draft -> tree -> mask -> verify -> commit -> emit."""
        active = self._active
        prefix = torch.tensor([len(r.tokens) - 1 for r in active], device=self.device)
        clock = StageClock()
        with clock.stage("draft"):
            logprobs, tokens = self._draft(active)
        with clock.stage("tree"):
            tree = self._tree(active, logprobs, tokens)
            kv_len = self._mask(tree, prefix)
        with clock.stage("verify"):
            logits = self.forward.verify(len(active), tree.tokens, prefix, kv_len)
            processed = self._processed(active, tree, logits)
            verdict = self._walk(active, tree, processed)
        with clock.stage("commit"):
            self._commit(verdict, prefix)
            events = [self._emit(i, r, verdict, logits, processed) for i, r in enumerate(active)]
        self._account(active, clock, tree, verdict)
        self._retire(events)
        return events

    def _draft(self, active: list[_Request]) -> tuple[torch.Tensor, torch.Tensor]:
        """Draft log-probs and tokens [n, depth, k]; none at all when no request wants a tree."""
        k = max(r.topk for r in active)
        if self.budget > 0 and any(r.budget > 0 for r in active):
            hidden = [r.hidden for r in active] if self.wants_features else None
            return self.drafter.propose([r.tokens for r in active], self.depth, k, hidden)
        n = len(active)
        return (
            torch.full((n, self.depth, k), float("-inf")),
            torch.zeros((n, self.depth, k), dtype=torch.long),
        )

    def _tree(self, active: list[_Request], lp: torch.Tensor, tok: torch.Tensor) -> TreeBatch:
        dev = self.device
        n = len(active)
        tree = build_tree(
            lp.to(dev),
            tok.to(dev),
            torch.tensor([r.tokens[-1] for r in active], device=dev),
            torch.tensor([r.budget for r in active], device=dev),
            torch.tensor([r.topk for r in active], device=dev),
            torch.full((n,), self.depth, device=dev),
            self.budget,
            pad_token=self.pad_token,
        )
        if not self.fixed_shape:
            # Without a fixed shape the query length may change every round: trim the padding
            # columns no request uses (a round with no drafts then costs one AR step). Requests
            # with smaller trees than the largest still carry padding rows.
            tree = tree.narrow(1 + int(tree.n_nodes.max()))
        return tree

    def _mask(self, tree: TreeBatch, prefix: torch.Tensor) -> int:
        """Fill the forward's mask and position buffers for these trees; returns the key length."""
        n, q_len = tree.tokens.shape
        kv_len = self.forward.kv_len(int(prefix.max()) + q_len)
        mask, positions = self.forward.buffers(n, kv_len, q_len)
        if self.budget == 0:  # an AR server: the reference keeps off the tree mask (docstring)
            fill_decode_mask(mask, positions, prefix)
        else:
            fill_tree_mask(mask, positions, tree, prefix)
        return kv_len

    def _processed(
        self, active: list[_Request], tree: TreeBatch, logits: torch.Tensor
    ) -> torch.Tensor:
        """The round's logits after each request's processors, every node from its own path:
        the grammar mask first (`RequestGrammar.tree_bitmask`), then `algo.processors`."""
        rows = [
            History(
                r.params.processors(),
                r.tokens[: r.prompt_len],
                r.tokens[r.prompt_len :],
                None
                if r.grammar is None
                else r.grammar.tree_bitmask(tree.tokens[i], tree.parents[i]),
            )
            for i, r in enumerate(active)
        ]
        faults = frozenset(mask_module._FAULTS & PROCESSOR_FAULTS)  # planted: tests only
        return tree_logits(logits, tree, rows, faults)

    def _walk(self, active: list[_Request], tree: TreeBatch, logits: torch.Tensor) -> Verdict:
        """Choose at every node from its processed `logits` (greedy or sampled; the lossy
        `accept_threshold` rule where the server has one below 1) and walk."""
        rows = [
            self._row_sampling(r, len(r.tokens) - 1, int(tree.depths[i].max()))
            for i, r in enumerate(active)
        ]
        choices = relaxed_choices(
            logits, tree, rows, target_choices(logits, tree, rows), self.config.accept_threshold
        )
        if f"unverified_b{self.budget}" in mask_module._FAULTS:  # planted fault, tests only
            choices = unverified_choices(tree, choices)
        for name, wrong in DRAFT_SAMPLING_FAULTS.items():
            if name in mask_module._FAULTS:  # planted fault, tests only
                choices = redrawn_drafted_choices(logits, tree, rows, choices, wrong)
        if "blind_drafts" in mask_module._FAULTS:  # planted fault, tests only
            tree = blind_tree(tree)
        return walk(tree, choices)

    def _commit(self, verdict: Verdict, prefix: torch.Tensor) -> None:
        """Keep the accepted path's KV (and features) right after each request's prefix."""
        self.cache.commit(*kv_moves(verdict.path, prefix))
        if self.wants_features:
            self._commit_features(verdict)

    def _account(
        self, active: list[_Request], clock: StageClock, tree: TreeBatch, verdict: Verdict
    ) -> None:
        """Charge the round's stage times and exposure to every request in it."""
        n, q_len = tree.tokens.shape
        shape = RoundShape(q_len, n, self.fixed_shape, self.forward.graph_enabled)
        depths, widths = tree_extent(tree)
        rows = zip(
            active,
            tree.n_nodes.tolist(),
            depths.tolist(),
            widths.tolist(),
            verdict.n_accepted.tolist(),
            strict=True,
        )
        for r, nodes, depth, width, accepted in rows:
            r.stats.add_round(clock.seconds, shape, nodes, depth, width, accepted)

    def _retire(self, events: list[TokenEvent]) -> None:
        """Release the slots of finished requests; their stats wait for ``pop_stats``."""
        active = self._active
        finished = [i for i, e in enumerate(events) if e.finished]
        for slot in reversed(finished):
            rid = active[slot].rid
            with self._lock:
                self._finished[rid] = active[slot].stats
                while len(self._finished) > FINISHED_STATS_KEPT:
                    self._finished.popitem(last=False)
            self._release(slot)

    def _commit_features(self, verdict: Verdict) -> None:
        """Append the accepted path's features (root included, bonus not: it is the new root)."""
        feats = self.forward.last_features
        assert feats is not None
        for i, r in enumerate(self._active):
            nodes = kept_nodes(verdict.path, verdict.n_accepted, i)
            new = feats[i, nodes]
            r.hidden = new if r.hidden is None else torch.cat([r.hidden, new], dim=0)

    def _row_sampling(self, r: _Request, prefix: int, max_depth: int) -> RowSampling:
        p = r.params
        if p.temperature <= 0:
            return RowSampling(0.0, 0, 1.0, 0.0, None)
        # Node at depth d predicts absolute position prefix + 1 + d: same u as AR there.
        us = [uniform(r.seed, prefix + 1 + d) for d in range(max_depth + 1)]
        return RowSampling(p.temperature, p.top_k, p.top_p, p.min_p, us)

    def _emit(
        self,
        i: int,
        r: _Request,
        verdict: Verdict,
        logits: torch.Tensor,
        processed: torch.Tensor,
    ) -> TokenEvent:
        """Push the accepted tokens through the stopping rules; logprobs are the raw `logits`',
        sample margins the `processed` distribution's (the one sampled)."""
        tokens, nodes = verdict.emitted(i)
        prefix = len(r.tokens) - 1  # cached tokens before this round's root
        before = len(r.emitter.token_ids)
        finished = False
        # Planted fault (tests only): stop strings looked for only at the round's last token.
        round_end = "stop_round_end" in mask_module._FAULTS
        for j, t in enumerate(tokens):
            r.tokens.append(t)
            if r.emitter.push(t, stop_strings=not round_end or j == len(tokens) - 1):
                finished = True
                break
        new = r.emitter.token_ids[before:]
        r.stats.emitted_tokens += len(new)
        if r.grammar is not None:
            r.grammar.advance(new)
        logprobs = None
        if r.params.logprobs is not None:
            emitting = nodes[: len(new)]
            logprobs = token_logprobs(logits[i, emitting], new, r.params.logprobs)
            if r.params.temperature > 0:
                rows = processed[i, emitting]
                margins = emitted_sample_margins(r.params, r.seed, rows, new, prefix)
                for entry, margin in zip(logprobs, margins, strict=True):
                    entry.sample_margin = margin
        return TokenEvent(
            r.rid, new, r.emitter.delta(), logprobs, finished, r.emitter.finish_reason
        )

    def _release(self, slot: int) -> None:
        """Drop the request in `slot`; the last active request moves in to keep slots dense."""
        last = len(self._active) - 1
        if slot != last:
            moved = self._active[last]
            self.cache.move_slot(last, slot, len(moved.tokens) - 1)
            self._active[slot] = moved
        self._active.pop()

    # ---- convenience -----------------------------------------------------------------------
    def generate(
        self, prompts: list[list[int]], params: list[SamplingParams]
    ) -> list[GenerationResult]:
        """Run the prompts to completion (batched by the step loop) and return their outputs."""
        ids = [f"generate-{id(self)}-{self._counter}-{i}" for i in range(len(prompts))]
        for rid, prompt, p in zip(ids, prompts, params, strict=False):
            self.add_request(rid, prompt, p)
        tokens: dict[str, list[int]] = {rid: [] for rid in ids}
        texts: dict[str, str] = {rid: "" for rid in ids}
        lps: dict[str, list[TokenLogprob]] = {rid: [] for rid in ids}
        reasons: dict[str, str | None] = {}
        while self.has_work():
            for e in self.step():
                if e.request_id not in tokens:
                    continue
                tokens[e.request_id] += e.token_ids
                texts[e.request_id] += e.text
                lps[e.request_id] += e.logprobs or []
                if e.finished:
                    reasons[e.request_id] = e.finish_reason
        return [
            GenerationResult(
                tokens[rid],
                texts[rid],
                reasons.get(rid),
                self.pop_stats(rid),
                lps[rid] if p.logprobs is not None else None,
            )
            for rid, p in zip(ids, params, strict=False)
        ]
