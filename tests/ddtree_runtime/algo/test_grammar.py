"""The grammar mask on a draft tree is AR's: at every node a tree can accept, the bitmask equals
an autoregressive xgrammar matcher's after the node's own path; on the real smollm2 tokenizer
(no model), over trees `build_tree` makes."""

from __future__ import annotations

import functools
from typing import Any

import pytest
import torch
import xgrammar as xgr
from transformers import AutoTokenizer

from ddtree_runtime.algo.grammar import GrammarKey, Grammars, grammar_key, mask_logits
from ddtree_runtime.algo.tree import build_tree
from ddtree_runtime.models import ensure_smollm2
from tests.lanes import slow_fixture

VOCAB = 49152  # smollm2-135m's logits width
EOS = 2  # its <|im_end|>, the runtime's EOS id
SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}


@functools.lru_cache(maxsize=1)
def tokenizer() -> Any:
    return AutoTokenizer.from_pretrained(str(ensure_smollm2()))


@functools.lru_cache(maxsize=1)
def smollm2_grammars() -> Grammars:
    return Grammars(tokenizer(), VOCAB, [EOS])


@pytest.fixture(scope="module")
@slow_fixture  # reading smollm2's 49,152-token tokenizer takes seconds
def grammars() -> Grammars:
    return smollm2_grammars()


def ids(text: str) -> list[int]:
    return list(tokenizer().encode(text))


def allowed(row: torch.Tensor) -> set[int]:
    logits = torch.zeros(VOCAB)
    mask_logits(logits, row)
    return set(torch.isfinite(logits).nonzero().flatten().tolist())


def real_tree(candidates: list[list[int]], budget: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(tokens, parents) of the tree `build_tree` picks from per-depth candidate lists (best
    first), as a drafter would propose them; root token 0."""
    depth, k = len(candidates), len(candidates[0])
    lp = torch.tensor([[-0.1 - 0.5 * r for r in range(k)]] * depth)[None]
    tree = build_tree(
        lp,
        torch.tensor(candidates)[None],
        torch.tensor([0]),
        torch.tensor([budget]),
        torch.tensor([k]),
        torch.tensor([depth]),
        budget,
    )
    assert int(tree.n_nodes[0]) == budget
    return tree.tokens[0], tree.parents[0]


def check_against_ar(
    grammars: Grammars, key: GrammarKey, history: list[int], candidates: list[list[int]]
) -> set[str]:
    """The tree's bitmask after `history` against AR matchers node by node; returns which kinds
    of node the tree held ("accepted" at depth >= 2, "rejected", "terminated")."""
    grammar = grammars.request(key)
    grammar.advance(history)
    tokens, parents = real_tree(candidates, budget=14)
    bitmask = grammar.tree_bitmask(tokens, parents)
    compiled = grammars.compile(key)
    seen = set()
    for node in range(tokens.shape[0]):
        nodes: list[int] = []  # the node's path below the root, top first
        up = node
        while up > 0:
            nodes.insert(0, up)
            up = int(parents[up])
        path = [int(tokens[n]) for n in nodes]
        ar = xgr.GrammarMatcher(compiled, override_stop_tokens=[EOS])
        for token in history:
            assert ar.accept_token(token)
        for depth, token in enumerate(path):
            # After EOS only EOS goes on (RequestGrammar's rule for a terminated matcher).
            ok = token == EOS if ar.is_terminated() else ar.accept_token(token)
            if not ok:  # rejected: never accepted, because its parent's mask takes it away
                seen.add("rejected")
                parent = int(parents[nodes[depth]])
                assert token not in allowed(bitmask[parent]), (node, parent, token)
                break
        else:
            want = torch.zeros_like(bitmask[node])
            if ar.is_terminated():
                want[EOS // 32] = 1 << (EOS % 32)
                seen.add("terminated")
            else:
                ar.fill_next_token_bitmask(want[None])
                if len(path) >= 2:
                    seen.add("accepted")
            assert torch.equal(bitmask[node], want), (node, path)
    return seen


def test_tree_bitmask_is_the_ar_matchers_after_each_nodes_path(grammars: Grammars) -> None:
    schema = grammar_key({"type": "json_schema", "json_schema": {"schema": SCHEMA}}, None)
    assert schema is not None
    history = ids('{"name": "Bo')
    depth_tokens = [ids('",'), ids(' "'), ids("age"), ids('":'), ids(" 4"), ids("2"), ids("}")]
    junk = ids(" hello") + ids("}")[:1] + ids("name")
    candidates = [[t[0], junk[i % len(junk)], EOS] for i, t in enumerate(depth_tokens)]
    assert check_against_ar(grammars, schema, history, candidates) >= {"accepted", "rejected"}
    # A regex that completes inside the tree: EOS accepted at depth 2, then only EOS.
    regex = grammar_key(None, "[0-9]{2}")
    assert regex is not None
    digits = [ids("1") + ids("2") + [EOS], ids("3") + [EOS] + ids("4"), [EOS, *ids("5x")]]
    seen = check_against_ar(grammars, regex, [], digits)
    assert seen == {"accepted", "rejected", "terminated"}


def test_a_complete_grammar_allows_only_eos_and_a_terminated_one_only_eos_again(
    grammars: Grammars,
) -> None:
    key = grammar_key({"type": "json_object"}, None)
    assert key is not None
    grammar = grammars.request(key)
    grammar.advance(ids('{"a": [1, 2]}'))
    root = torch.tensor([ids("}")[0]])
    assert allowed(grammar.tree_bitmask(root, torch.tensor([-1]))[0]) == {EOS}
    grammar.advance([EOS])  # past EOS (ignore_eos): the tree asks for EOS everywhere
    bitmask = grammar.tree_bitmask(torch.tensor([EOS, EOS, 5]), torch.tensor([-1, 0, 0]))
    assert all(allowed(row) == {EOS} for row in bitmask)


def test_chain_bitmask_masks_each_position_of_a_continuation(grammars: Grammars) -> None:
    key = grammar_key(None, "(yes|no)")
    assert key is not None
    rows = grammars.request(key).chain_bitmask(0, [*ids("yes"), EOS])
    assert len(rows) == 2 and allowed(rows[1]) == {EOS}
    assert ids("yes")[0] in allowed(rows[0]) and ids(" maybe")[0] not in allowed(rows[0])


@pytest.mark.parametrize(
    ("response_format", "regex", "message"),
    [
        ({"type": "xml"}, None, "response_format.type must be text, json_object or json_schema"),
        ({"type": "json_schema", "json_schema": {"name": "x"}}, None, "schema must be an object"),
        ("json", None, "response_format must be an object"),
        ({"type": "json_object"}, "a+", "give response_format or regex, not both"),
        (None, "", "regex must be a non-empty string"),
    ],
)
def test_grammar_key_refuses_shapes_it_cannot_read(
    response_format: Any, regex: Any, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        grammar_key(response_format, regex)


def test_grammar_key_reads_text_schemas_in_their_order_and_regexes() -> None:
    assert grammar_key(None, None) is None and grammar_key({"type": "text"}, None) is None
    key = grammar_key({"type": "json_schema", "json_schema": {"name": "p", "schema": SCHEMA}}, None)
    assert key == (
        "json_schema",
        '{"type":"object","properties":{"name":{"type":"string"},'
        '"age":{"type":"integer"}},"required":["name","age"]}',
    )
    assert grammar_key({"type": "text"}, "a+") == ("regex", "a+")


def test_bad_schemas_and_regexes_are_client_errors(grammars: Grammars) -> None:
    with pytest.raises(ValueError, match='invalid json schema: .*Unsupported type "frob"'):
        grammars.compile(("json_schema", '{"type": "frob"}'))
    with pytest.raises(ValueError, match="invalid regex: .*parenthesis is not closed"):
        grammars.compile(("regex", "(abc"))
