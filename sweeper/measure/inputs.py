"""What a run's inputs need from a served model, resolved once and kept in the run directory.

Two kinds of prompt cannot be written before a server answers:

- a synthetic prompt (`tokens: N`) is N token ids of the served model's tokenizer: a seeded
  plain-English text is tokenized once through the engine's `/tokenize` (vLLM's route; the
  bundled runtime serves it too) and each prompt is a window of N ids at a seeded offset. Sent
  as ids on the completions API, the server counts exactly N (its usage says so: the request's
  `prompt_tokens` column);
- a later turn of a conversation (`answers_from`) holds the greedy answers to the turns before
  it. They are asked once, of the AR baseline (which runs first on every host), turn by turn,
  through the engine bound to what that server negotiated, and every point of every config
  then sends the same messages, so a turn-2 divergence is the config's, never its history's.
  They are never asked of a speculative server: one that refuses logprobs (SGLang's DDTREE
  builds) would fail them, and its answers would be the config under test's.

The result is `inputs.json` in the run directory (written atomically): a resumed run, and the
other hosts of the run, read it instead of asking again; with `runtime.baseline_run` the earlier
run's file is used, so the inputs are those its baseline answered.
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx

from sweeper.config import RequestConfig
from sweeper.engines.base import Engine
from sweeper.measure.client import stream_request
from sweeper.measure.sse_http import StreamClient
from sweeper.measure.workload import expand_requests
from sweeper.results.store import atomic_write
from sweeper.spec import PromptSpec, WorkloadSpec
from sweeper.statefile import STATE, read_state

INPUTS_FILE = "inputs.json"
#: Words of the synthetic source text: common English, so tokenizers split it as prose.
_WORDS_TEXT = (
    "the of and to in is was for on that with as by at from his her this which have are were "
    "be one all had not but they their an has more when who will would there been its time "
    "into only other new some could these two may first then do any like my now over such our "
    "man me even most made after also did many before must through back years where much your "
    "way well down should because each just those people how too little state good very make "
    "world still own see men work long get here between both life being under never day same "
    "another know while last might us great old year off come since against go came right used "
    "take three small water light river city house field story"
)
_WORDS = _WORDS_TEXT.split()


class InputsError(RuntimeError):
    """The inputs could not be resolved against this server (the reason, for every request)."""


@dataclass
class Inputs:
    """The run's resolved inputs (see the module docstring); `resolve` is thread-safe."""

    workload: WorkloadSpec
    run_dir: Path
    engine: Engine
    #: An earlier run whose inputs to reuse (`runtime.baseline_run`).
    earlier: str | Path | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _resolved: dict[str, Any] | None = None

    @property
    def needed(self) -> bool:
        return any(p.tokens or p.answers_from for p in self.workload.prompts)

    @property
    def histories(self) -> bool:
        """Some prompt is a later turn, whose history an AR server must answer."""
        return any(p.answers_from for p in self.workload.prompts)

    def resolve(
        self,
        base_url: str,
        model: str | None,
        *,
        engine: Engine | None = None,
        ar: bool = True,
    ) -> Mapping[str, Mapping[str, Any]]:
        """prompt id -> {"token_ids": [...]} or {"messages": [...]}; InputsError when the
        server cannot give what is missing. `engine`: the run's engine bound to this server
        (the run's own when None); `ar`: whether it is an AR server (histories are asked of
        nothing else)."""
        if not self.needed:
            return {}
        with self._lock:
            if self._resolved is None:
                path = self.run_dir / INPUTS_FILE
                found = _read(path) or (
                    _read(Path(self.earlier, INPUTS_FILE)) if self.earlier else None
                )
                if found is None or not self._complete(found):
                    if self.histories and not ar:
                        raise InputsError(
                            "later turns' histories are the AR baseline's answers, and no AR "
                            "server has answered them yet (they are never asked of a "
                            "speculative server)"
                        )
                    found = asyncio.run(self._build(base_url, model, engine or self.engine))
                    text = json.dumps(found)
                    atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
                self._resolved = found
            return dict(self._resolved["prompts"])

    def _complete(self, found: Mapping[str, Any]) -> bool:
        prompts = found.get("prompts") or {}
        wanted = [p.id for p in self.workload.prompts if p.tokens or p.answers_from]
        return all(pid in prompts for pid in wanted)

    async def _build(self, base_url: str, model: str | None, engine: Engine) -> dict[str, Any]:
        async with StreamClient() as stream:
            client = stream.control  # tokenizing; answers are streamed by the measuring client
            prompts = await self._synthetic(client, base_url, model)
            answers: dict[str, str] = {}
            needed = {pid for p in self.workload.prompts for pid in p.answers_from}
            for prompt in self.workload.prompts:
                if prompt.answers_from:
                    prompts[prompt.id] = {"messages": filled(prompt, answers)}
                if prompt.id in needed:
                    answer = await self._answer(stream, base_url, model, prompt, prompts, engine)
                    answers[prompt.id] = answer
        return {"prompts": prompts, "answers": answers, "asked_of": base_url}

    async def _synthetic(
        self, client: httpx.AsyncClient, base_url: str, model: str | None
    ) -> dict[str, Any]:
        lengths = {p.id: p.tokens for p in self.workload.prompts if p.tokens}
        if not lengths:
            return {}
        seed = self.workload.seed if self.workload.seed is not None else 0
        rng = random.Random(f"synthetic-text:{seed}")
        longest = max(lengths.values())
        n_words = 2 * longest + 64
        while True:
            text = " ".join(rng.choice(_WORDS) for _ in range(n_words))
            ids = await tokenize(client, base_url, model, text)
            if len(ids) >= 2 * longest:
                break
            n_words *= 2
        out: dict[str, Any] = {}
        for prompt_id, n in lengths.items():
            start = random.Random(f"{seed}:{prompt_id}").randrange(0, len(ids) - n + 1)
            out[prompt_id] = {"token_ids": ids[start : start + n]}
        return out

    async def _answer(
        self,
        client: StreamClient,
        base_url: str,
        model: str | None,
        prompt: PromptSpec,
        resolved: Mapping[str, Mapping[str, Any]],
        engine: Engine,
    ) -> str:
        """The greedy answer to one turn, with its own history filled."""
        greedy = RequestConfig.make(0.0, self.workload.max_tokens, 1, seed=self.workload.seed)
        (spec,) = expand_requests(
            [prompt], greedy, repeats=1, chat=self.workload.api == "chat", inputs=resolved
        )
        record = await stream_request(
            client, base_url, replace(spec, repeat=-1), engine, model=model
        )
        if record.get("error"):
            message = f"the history of a later turn: answering {prompt.id} failed: "
            raise InputsError(message + str(record["error"]))
        return str(record.get("text") or "")


def filled(prompt: PromptSpec, answers: Mapping[str, str]) -> list[dict[str, str]]:
    """The prompt's messages, each empty assistant message holding the next answer."""
    pending = iter(prompt.answers_from)
    out = []
    for message in prompt.messages or []:
        content = message.content
        if message.role == "assistant" and not content:
            content = answers[next(pending)]
        out.append({"role": message.role, "content": content})
    return out


async def tokenize(
    client: httpx.AsyncClient, base_url: str, model: str | None, text: str
) -> list[int]:
    """The served tokenizer's ids for `text` (no special tokens), via POST /tokenize."""
    body: dict[str, Any] = {"prompt": text, "add_special_tokens": False}
    if model:
        body["model"] = model
    try:
        resp = await client.post(base_url + "/tokenize", json=body)
    except httpx.HTTPError as exc:
        raise InputsError(f"synthetic prompts need the served tokenizer: {exc}") from None
    if resp.status_code != 200:
        raise InputsError(
            f"synthetic prompts need the served tokenizer, and POST /tokenize answered "
            f"{resp.status_code}: {resp.text[:200]}"
        )
    tokens = resp.json().get("tokens")
    if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
        raise InputsError("POST /tokenize answered no list of token ids")
    return list(tokens)


def _read(path: Path) -> dict[str, Any] | None:
    try:
        found = json.loads(read_state(path, STATE))
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None
