"""`advertised_sampling`: a server is coupled only when its /server_info says `sampling.coupled:
true` (asked of a real loopback server), never because it said nothing, said false, or had no
/server_info; an `info` that already holds the sampling block is read without asking."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from sweeper.services.readiness import advertised_sampling
from tests.sweeper.conftest import free_port
from tests.sweeper.json_server import serve

INFO = {"launch_id": "abc", "config": {"model": "m", "budget": 8}}
COUPLED = {**INFO, "sampling": {"coupled": True}}


#: What the one loopback server of this module answers; each test sets its /server_info.
ROUTES: dict[str, Any] = {}


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serve(ROUTES) as base:
        yield base


def _asked(url: str, document: Any, info: dict[str, Any] | None = None) -> tuple[str, str]:
    ROUTES.clear()
    ROUTES["/server_info"] = document
    with httpx.Client() as client:
        return advertised_sampling(client, url, info or {})


def test_a_server_advertising_coupled_sampling_is_coupled(url: str) -> None:
    mode, evidence = _asked(url, COUPLED)
    assert mode == "coupled"
    assert "sampling.coupled" in evidence


@pytest.mark.parametrize(
    "document",
    [
        INFO,  # says nothing about sampling
        {**INFO, "sampling": {"coupled": False}},
        {**INFO, "sampling": {"coupled": "true"}},  # a string is not the boolean
        {**INFO, "sampling": {}},
        {**INFO, "sampling": True},
        ["not", "a", "document"],
        "plain text, not JSON",
    ],
)
def test_anything_else_is_independent(url: str, document: Any) -> None:
    mode, evidence = _asked(url, document)
    assert mode == "independent"
    assert "no coupled sampling advertised" in evidence


def test_a_server_without_server_info_is_independent(url: str) -> None:
    ROUTES.clear()
    ROUTES["/health"] = {"status": "ok"}
    with httpx.Client() as client:
        assert client.get(url + "/server_info").status_code == 404
        mode, _ = advertised_sampling(client, url, {})
    assert mode == "independent"


def test_a_server_that_does_not_answer_is_independent() -> None:
    with httpx.Client() as client:
        mode, _ = advertised_sampling(client, f"http://127.0.0.1:{free_port()}", {})
    assert mode == "independent"


def test_info_holding_the_block_is_read_without_asking(url: str) -> None:
    # The server would say the opposite of what `info` holds: the answer follows `info`.
    assert _asked(url, COUPLED, {**INFO, "sampling": {"coupled": False}})[0] == "independent"
    assert _asked(url, INFO, COUPLED)[0] == "coupled"
    # And with nothing listening at all.
    with httpx.Client() as client:
        closed = f"http://127.0.0.1:{free_port()}"
        assert advertised_sampling(client, closed, COUPLED)[0] == "coupled"
        assert advertised_sampling(client, closed, {"sampling": None})[0] == "independent"


def test_info_without_the_block_is_asked(url: str) -> None:
    # A proof that fetched /server_info without a sampling block (an older engine's proof):
    # the server is asked.
    assert _asked(url, COUPLED, INFO)[0] == "coupled"
