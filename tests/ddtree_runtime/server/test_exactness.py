"""Lossless over HTTP: at temperature 0, DDTree servers answer token for token like an AR server
(`--speculative none`) on smollm2-135m, with simultaneous requests of different lengths, so the
engine verifies them together in one padded batch. One server: AR, then switched in place
(`POST /admin/switch`) to each DDTree config."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest

from ddtree_runtime.server.local_server import LocalServer

pytestmark = pytest.mark.slow

MODEL = "smollm2-135m"
MAX_TOKENS = 32
# Different lengths (padding) and content: repetitive ones let the n-gram drafter hit, so trees
# are accepted deep; free prose makes it miss.
PROMPTS = [
    "The capital of France is",
    "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return",
    "Once upon a time, in a small village by the sea, there lived an old fisherman who",
    "A B C D E F G A B C D E F G A B C",
]
CHAT = [{"role": "user", "content": "List three colours of the rainbow."}]

FLAGS = ["--model", MODEL, "--block-size", "8", "--max-batch", "8", "--budget", "16"]
# Switched to, in this order, on the AR server.
SWITCHES = {
    "ddtree-topk1": {"speculative": "ddtree", "topk": 1},
    "ddtree-topk4": {"topk": 4},
}
# The seed's case: chains of at most 7 in a verify held at 17 wide (no graph on CPU), each
# request alone (sent one after another), so the fixed width alone makes it pad.
FIXED = {"topk": 1, "cuda_graph": True}
#: The prompts the fixed-width case sends one at a time (each alone costs a full-width verify
#: per round): the short, the repetitive and the free-prose one.
FIXED_PROMPTS = [0, 1, 3]


Outputs = tuple[list[list[int]], int, int]


GREEDY = {"model": MODEL, "max_tokens": MAX_TOKENS, "temperature": 0, "return_token_ids": True}


async def token_ids_of_simultaneous_requests(url: str) -> Outputs:
    """Token ids of every prompt (plus one chat), all sent at once; the verify rounds and the
    rounds with padding."""
    async with httpx.AsyncClient(base_url=url, timeout=300) as client:
        requests = [client.post("/v1/completions", json={**GREEDY, "prompt": p}) for p in PROMPTS]
        requests.append(client.post("/v1/chat/completions", json={**GREEDY, "messages": CHAT}))
        responses = await asyncio.gather(*requests)
    return _outputs(responses)


def token_ids_one_at_a_time(url: str, indices: list[int]) -> Outputs:
    """As above for the prompts at `indices`, each sent after the previous one's answer."""
    with httpx.Client(base_url=url, timeout=300) as client:
        responses = [
            client.post("/v1/completions", json={**GREEDY, "prompt": PROMPTS[i]}) for i in indices
        ]
    return _outputs(responses)


def _outputs(responses: list[httpx.Response]) -> Outputs:
    bodies = [r.json() for r in responses]
    assert all(r.status_code == 200 for r in responses), bodies
    rounds = sum(b["ddtree"]["verify_rounds"] for b in bodies)
    padded = sum(b["ddtree"]["padded_rounds"] for b in bodies)
    return [b["choices"][0]["token_ids"] for b in bodies], rounds, padded


@pytest.fixture(scope="module")
def outputs() -> Iterator[dict[str, Outputs]]:
    results = {}
    with LocalServer([*FLAGS, "--speculative", "none"]) as server:
        results["ar"] = asyncio.run(token_ids_of_simultaneous_requests(server.url))
        for name, change in SWITCHES.items():
            switched = httpx.post(f"{server.url}/admin/switch", json=change, timeout=300)
            assert switched.status_code == 200, switched.text
            results[name] = asyncio.run(token_ids_of_simultaneous_requests(server.url))
        switched = httpx.post(f"{server.url}/admin/switch", json=FIXED, timeout=300)
        assert switched.status_code == 200, switched.text
        results["ddtree-topk1-fixed"] = token_ids_one_at_a_time(server.url, FIXED_PROMPTS)
    yield results


@pytest.mark.parametrize("name", ["ddtree-topk1", "ddtree-topk4", "ddtree-topk1-fixed"])
def test_ddtree_equals_ar_token_for_token(outputs: dict[str, Outputs], name: str) -> None:
    ar_ids, ar_rounds, _ = outputs["ar"]
    ids, rounds, padded = outputs[name]
    assert all(len(seq) > 0 for seq in ar_ids)
    if name.endswith("fixed"):
        ar_ids = [ar_ids[i] for i in FIXED_PROMPTS]
        ar_rounds = sum(len(seq) for seq in ar_ids)
    for prompt_index, (got, want) in enumerate(zip(ids, ar_ids, strict=True)):
        assert got == want, f"prompt {prompt_index} diverges from AR"
    # Speculation did something: fewer verify rounds than tokens (AR needs one per token).
    assert outputs["ar"][1] == sum(len(seq) for seq in outputs["ar"][0])
    assert rounds < ar_rounds
    if name.endswith("fixed"):
        assert padded == rounds  # every round of every request went through the padding path
