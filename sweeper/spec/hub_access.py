"""Whether the Hugging Face hub can be asked from here, and offline mode for a block.

A hub id read without HF_HUB_OFFLINE on a machine without a network used to retry for half a
minute (huggingface_hub's backoff) before failing. `hub_unreachable` asks the endpoint one
bounded HTTP request first; where it gets no answer, `offline_mode` sets datasets' and
huggingface_hub's offline switches (module constants they read at each call) for the load, so the
cache is read at once. `caches` names where a hub dataset is looked for, for the one line that
says it is not there.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from urllib.parse import urlsplit

#: Seconds the hub's endpoint may take to answer before it counts as unreachable: a name that
#: does not resolve or a refused port answer in milliseconds.
PROBE_S = 3.0


def hub_unreachable(timeout: float = PROBE_S) -> str | None:
    """Why the hub cannot be reached from here (None: its endpoint answered an HTTP request,
    whatever the status, within `timeout` seconds; through the environment's proxy, as
    huggingface_hub goes). The request runs in a thread: a resolver that never answers costs
    `timeout`, not its own minutes."""
    import httpx
    import huggingface_hub.constants

    endpoint = huggingface_hub.constants.ENDPOINT
    host = urlsplit(endpoint).hostname or endpoint
    said: list[str] = []

    def ask() -> None:
        try:
            httpx.head(endpoint, timeout=timeout)
            said.append("")
        except httpx.HTTPError as exc:
            cause = exc.__cause__ or exc.__context__
            said.append(_os_reason(cause) or str(exc) or type(exc).__name__)

    thread = threading.Thread(target=ask, name="hub-probe", daemon=True)
    thread.start()
    thread.join(timeout + 1)
    if not said:
        return f"{host}: no answer in {timeout:g} s"
    return f"{host}: {said[0]}" if said[0] else None


def _os_reason(exc: BaseException | None) -> str:
    """The OS's words for a failed connection ("Connection refused"), found down the chain."""
    while exc is not None:
        if isinstance(exc, OSError) and exc.strerror:
            return exc.strerror
        exc = exc.__cause__ or exc.__context__
    return ""


@contextlib.contextmanager
def offline_mode(on: bool) -> Iterator[None]:
    """datasets and huggingface_hub in offline mode for the block (their module constants,
    which they read at each call), then as they were."""
    if not on:
        yield
        return
    import datasets.config
    import huggingface_hub.constants

    saved = (
        datasets.config.HF_HUB_OFFLINE,
        datasets.config.HF_DATASETS_OFFLINE,
        huggingface_hub.constants.HF_HUB_OFFLINE,
    )
    datasets.config.HF_HUB_OFFLINE = datasets.config.HF_DATASETS_OFFLINE = True
    huggingface_hub.constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        (
            datasets.config.HF_HUB_OFFLINE,
            datasets.config.HF_DATASETS_OFFLINE,
            huggingface_hub.constants.HF_HUB_OFFLINE,
        ) = saved


def offline() -> bool:
    """Whether datasets (or huggingface_hub) is in offline mode."""
    try:
        import datasets.config
        import huggingface_hub.constants
    except ImportError:
        return False
    return bool(datasets.config.HF_HUB_OFFLINE or huggingface_hub.constants.HF_HUB_OFFLINE)


def caches() -> str:
    """The caches a hub id is looked for in: datasets' and huggingface_hub's."""
    import datasets.config
    import huggingface_hub.constants

    return f"{datasets.config.HF_DATASETS_CACHE}, {huggingface_hub.constants.HF_HUB_CACHE}"
