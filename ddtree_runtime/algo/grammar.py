"""Structured output: a request's grammar (xgrammar, the library vLLM and SGLang use) and the
token bitmask it allows at every node of a draft tree.

A request asks for a JSON schema (`response_format` json_schema), any JSON (json_object) or a
regex (`params.structured_output` reads which). The engine compiles it once through its
`Grammars` (one xgrammar `GrammarCompiler` per engine, so per tokenizer, whose cache keeps every
grammar it compiled) and keeps a `RequestGrammar`: a matcher holding the state after the tokens
emitted so far, which `advance` moves on after each round.

The mask at a tree node is the matcher's after the node's own ancestor path (root included: the
root is the last emitted token, already accepted, or the last prompt token in the first round);
it is what AR's matcher allows at the position the node's logits predict, so the choice there is
AR's. xgrammar's `traverse_draft_tree` fills them in one depth-first walk (accept going down,
roll back going up; rollback is unlimited in xgrammar 0.2.8, so no depth to size). A node whose
token the grammar rejects after its parent's path can never be accepted: its parent's mask takes
that token away from the parent's choice, and every node below it hangs on it. Its mask (and its
subtree's) is therefore free; it is left all-allowed, so no row of logits is ever wholly -inf
(no NaN from a softmax).

Termination: once the grammar is complete, xgrammar allows only the stop tokens (the runtime's
EOS ids), so generation ends where AR's does. A stop token accepted terminates the matcher, after
which xgrammar fills no mask; the runtime then allows only the stop tokens (the same for AR and
every tree node), so a request that goes on past EOS (`ignore_eos`, `min_tokens`) pads with EOS.
"""

from __future__ import annotations

import json
from typing import Any

import torch
import xgrammar as xgr

#: What xgrammar's compiler may keep of compiled grammars, per engine (least recently used go).
CACHE_LIMIT_BYTES = 256 << 20

#: (kind, text): ("json_schema", the schema as JSON), ("json_object", ""), ("regex", pattern).
GrammarKey = tuple[str, str]


class Grammars:
    """One engine's grammar compiler over its tokenizer (`vocab_size`: the logits' width)."""

    def __init__(self, tokenizer: Any, vocab_size: int, stop_token_ids: list[int]) -> None:
        info = xgr.TokenizerInfo.from_huggingface(
            tokenizer, vocab_size=vocab_size, stop_token_ids=list(stop_token_ids)
        )
        self.compiler = xgr.GrammarCompiler(
            info, max_threads=1, cache_enabled=True, cache_limit_bytes=CACHE_LIMIT_BYTES
        )
        self.vocab_size = vocab_size
        self.stop_token_ids = list(stop_token_ids)

    def compile(self, key: GrammarKey) -> xgr.CompiledGrammar:
        """The compiled grammar (cached by xgrammar); ValueError for a schema or regex it
        cannot take, with xgrammar's reason."""
        kind, text = key
        try:
            if kind == "json_schema":
                return self.compiler.compile_json_schema(text)
            if kind == "json_object":
                return self.compiler.compile_builtin_json_grammar()
            if kind == "regex":
                return self.compiler.compile_regex(text)
        except RuntimeError as error:  # xgrammar reports a bad schema or regex this way
            reason = str(error).strip().splitlines()[-1]
            raise ValueError(f"invalid {kind.replace('_', ' ')}: {reason}") from error
        raise ValueError(f"unknown grammar kind {kind!r}")

    def request(self, key: GrammarKey) -> RequestGrammar:
        """A fresh matcher for one request (ValueError as `compile`)."""
        return RequestGrammar(self.compile(key), self.vocab_size, self.stop_token_ids)


def grammar_key(response_format: Any, regex: Any) -> GrammarKey | None:
    """A request's grammar from OpenAI's `response_format` ({"type": "text" | "json_object" |
    "json_schema", "json_schema": {"name": ..., "schema": {...}}}) and SGLang's `regex`; None
    when it asks for none. ValueError (a client error) for a shape this cannot read, or both."""
    key = None
    if response_format is not None:
        if not isinstance(response_format, dict):
            raise ValueError("response_format must be an object")
        kind = response_format.get("type")
        if kind == "json_object":
            key = ("json_object", "")
        elif kind == "json_schema":
            spec = response_format.get("json_schema")
            schema = spec.get("schema") if isinstance(spec, dict) else None
            if not isinstance(schema, dict):
                raise ValueError("response_format.json_schema.schema must be an object")
            # Compact text, keys in the order given: xgrammar orders the output's properties
            # as the schema lists them.
            key = ("json_schema", json.dumps(schema, separators=(",", ":")))
        elif kind != "text":
            raise ValueError("response_format.type must be text, json_object or json_schema")
    if regex is not None:
        if not isinstance(regex, str) or not regex:
            raise ValueError("regex must be a non-empty string")
        if key is not None:
            raise ValueError("give response_format or regex, not both")
        key = ("regex", regex)
    return key


class RequestGrammar:
    """One request's matcher: the state after every token emitted so far (module docstring)."""

    def __init__(self, compiled: xgr.CompiledGrammar, vocab_size: int, stop: list[int]) -> None:
        self.matcher = xgr.GrammarMatcher(compiled, override_stop_tokens=stop)
        self.words = (vocab_size + 31) // 32
        self.stop_only = torch.zeros(self.words, dtype=torch.int32)
        for token in stop:  # bit t of word t // 32, as xgrammar packs them
            self.stop_only[token // 32] |= _bit(token % 32)
        self.stop = torch.tensor(stop, dtype=torch.long)

    def advance(self, tokens: list[int]) -> None:
        """Move the matcher on by one round's emitted tokens. Stop tokens after termination change
        nothing; a token the grammar rejects (only a planted fault lets one through) leaves the
        matcher where it was, as xgrammar does."""
        for token in tokens:
            if not self.matcher.is_terminated():
                self.matcher.accept_token(token)

    def tree_bitmask(self, tokens: torch.Tensor, parents: torch.Tensor) -> torch.Tensor:
        """[q, words] int32 bitmask per node of one request's tree (node 0 the root; parents -1
        for the root and padding, which no walk reaches and which stays all-allowed)."""
        q = tokens.shape[0]
        bitmask = torch.full((q, self.words), -1, dtype=torch.int32)
        if self.matcher.is_terminated():
            bitmask[:] = self.stop_only
            return bitmask
        first_child = [-1] * q
        next_sibling = [-1] * q
        last_child: dict[int, int] = {}
        for node, parent in enumerate(parents.tolist()):
            if parent < 0:
                continue
            if first_child[parent] < 0:
                first_child[parent] = node
            else:
                next_sibling[last_child[parent]] = node
            last_child[parent] = node
        self.matcher.traverse_draft_tree(
            torch.tensor(first_child, dtype=torch.long),
            torch.tensor(next_sibling, dtype=torch.long),
            tokens.to("cpu", torch.long),
            bitmask,
        )
        # Rejected nodes come back all-disallowed: free (docstring), so all-allowed. A drafted
        # stop token accepted terminates the matcher (no mask filled): only stop tokens follow.
        # The root is no drafted token: a prompt may end in a stop token the matcher never saw.
        bitmask[(bitmask == 0).all(dim=1)] = -1
        drafted_stop = torch.isin(tokens.cpu(), self.stop) & (parents.cpu() >= 0)
        bitmask[drafted_stop] = self.stop_only
        return bitmask

    def chain_bitmask(self, root: int, continuation: list[int]) -> torch.Tensor:
        """[len(continuation), words]: the mask at each continuation token's position, the chain
        root -> continuation[:-1] as a tree (how `/score` masks a scored continuation)."""
        tokens = torch.tensor([root, *continuation[:-1]], dtype=torch.long)
        parents = torch.arange(-1, len(continuation) - 1, dtype=torch.long)
        return self.tree_bitmask(tokens, parents)


def _bit(index: int) -> int:
    """Bit `index` of an int32 word as a Python int (bit 31 is the sign bit)."""
    return (1 << index) - (1 << 32 if index == 31 else 0)


def mask_logits(logits: torch.Tensor, bitmask: torch.Tensor) -> None:
    """Set logits [..., V] to -inf where `bitmask` [..., words] disallows, in place. xgrammar's
    plain-torch kernel: any device and dtype, and no Triton (`make setup` leaves it out)."""
    xgr.apply_token_bitmask_inplace(
        logits, bitmask.to(logits.device), vocab_size=logits.shape[-1], backend="torch_native"
    )
