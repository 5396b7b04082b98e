"""SGLang's in-place switch: the accept thresholds through `/set_internal_state`, negotiated per
build and read back from the scheduler.

`POST /set_internal_state {"server_args": {key: value}}` answers one bool per scheduler (DP
rank): whether it took the whole request. Which keys a build takes is its handler's allow-list,
read in SGLang's own code:
- 0.5.15 (`srt/managers/scheduler.py:3788`, `Scheduler.set_internal_state`) and PR #29907's
  DDTREE build (93e9850e, the same method): `pp_max_micro_batch_size`,
  `speculative_accept_threshold_single`, `speculative_accept_threshold_acc`; any other key is
  refused ("Updating {k} is not supported.", `updated: false`); no check of the value or of the
  speculative algorithm: an AR server takes the thresholds too.
- 0.5.23 (`srt/managers/scheduler_components/internal_state.py:146-215`): the same three keys
  and two DSpark ones; a threshold other than 1.0 is refused on a DFLASH server while a request
  holding a sampling mask is active ("Updating {key} is rejected while DFlash sampling-mask
  requests are active.").
- Every version of the handler the code index holds lists both thresholds (the earliest
  allowed only them); a build before the handler answers the route 404.
The value taken lands in the scheduler's server args, which `/server_info`'s `internal_states`
(one dict per DP rank: `Scheduler.get_internal_state`, 0.5.15 `scheduler.py:3758`; 0.5.23
`internal_state.py:45`, the context's resolved args) report; its top-level fields are the HTTP
process's own copy of the launch's args and never change. So a switched value is read back from
`internal_states` only, and the identity proof reads the threshold in effect from there too.
Which keys a running build switches is negotiated (`negotiate_switchable`), never assumed: each
is set to the value it already has and read back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import httpx

from sweeper.catalog.presets import SGLANG_ACCEPT_THRESHOLDS
from sweeper.engines.base import EngineError
from sweeper.engines.common import same_value

#: The knobs an SGLang build may switch in place, by their grid names (= SGLang's field names).
SWITCH_KEYS: tuple[str, ...] = tuple(SGLANG_ACCEPT_THRESHOLDS)
#: `Capabilities.details` key: the knobs negotiation found this build switches.
SWITCHABLE = "switchable"
ROUTE = "/set_internal_state"
#: Reads the running server's `/server_info` (the engine's own reader).
InfoReader = Callable[[], Mapping[str, Any]]


def live_values(info: Mapping[str, Any]) -> dict[str, Any]:
    """The schedulers' values of `SWITCH_KEYS` from a `/server_info` answer (every DP rank
    must agree: EngineError where they differ); a key no scheduler reports is absent."""
    states = info.get("internal_states")
    ranks = [s for s in states if isinstance(s, Mapping)] if isinstance(states, list) else []
    live: dict[str, Any] = {}
    for key in SWITCH_KEYS:
        values = [rank[key] for rank in ranks if key in rank]
        if not values:
            continue
        if any(not same_value(values[0], v) for v in values) or len(values) != len(ranks):
            raise EngineError(f"SGLang's schedulers disagree on {key}: {values}")
        live[key] = values[0]
    return live


def post(client: httpx.Client, base_url: str, values: Mapping[str, Any]) -> str | None:
    """Ask the handler to set `values`; None when every scheduler took them, else what it
    answered, in words."""
    try:
        resp = client.post(base_url + ROUTE, json={"server_args": dict(values)}, timeout=30.0)
    except httpx.HTTPError as exc:
        return f"{ROUTE} unreachable: {exc}"
    if resp.status_code == 404:
        return f"the build has no {ROUTE} (404)"
    try:
        answer = resp.json()
    except ValueError:
        answer = resp.text[:200]
    if resp.status_code != 200:
        return f"{ROUTE} answered HTTP {resp.status_code}: {answer}"
    taken = answer if isinstance(answer, list) else [answer]
    if not taken or not all(a is True or (isinstance(a, Mapping) and a.get("updated") is True)
                            for a in taken):  # fmt: skip
        return f"its {ROUTE} handler refused it (answered {answer})"
    return None


def negotiate_switchable(
    client: httpx.Client, base_url: str, read: InfoReader
) -> tuple[tuple[str, ...], list[str]]:
    """The `SWITCH_KEYS` this running build switches in place, and the evidence: each key its
    schedulers report is set to the value it has (changing nothing but SGLang's acceptance
    average, which it restarts) and read back from `/server_info`."""
    live = live_values(read())
    found: list[str] = []
    evidence: list[str] = []
    for key in SWITCH_KEYS:
        if key not in live:
            evidence.append(f"switch {key}: not in /server_info internal_states: not switchable")
            continue
        refused = post(client, base_url, {key: live[key]})
        if refused is None:
            back = live_values(read()).get(key)
            if not same_value(live[key], back):
                refused = f"read back {back!r} after setting {live[key]!r}"
        if refused is None:
            found.append(key)
            evidence.append(f"switch {key}: {ROUTE} took {live[key]!r}, read back alike")
        else:
            evidence.append(f"switch {key}: {refused}: not switchable")
    return tuple(found), evidence


def switch(
    client: httpx.Client,
    base_url: str,
    read: InfoReader,
    wanted: Mapping[str, Any],
    switchable: frozenset[str],
    named: str,
) -> None:
    """Set the knobs of `wanted` whose live value differs, then read them back; EngineError
    with one line naming the build (`named`) and the key when the build cannot switch it
    (negotiated), its handler refuses it, or the value read back is not the one asked."""
    live = live_values(read())
    changes = {k: v for k, v in wanted.items() if k not in live or not same_value(v, live[k])}
    for key in changes:
        if key not in switchable:
            raise EngineError(
                f"{named} cannot switch {key} in place: negotiation found it not switchable "
                "(a load is needed)"
            )
    if not changes:
        return
    refused = post(client, base_url, changes)
    if refused is not None:
        raise EngineError(f"{named} refused to switch {', '.join(changes)}: {refused}")
    back = live_values(read())
    for key, value in changes.items():
        if key not in back or not same_value(value, back[key]):
            raise EngineError(
                f"{named} did not switch {key}: asked {value!r}, its schedulers run "
                f"{back.get(key)!r}"
            )
