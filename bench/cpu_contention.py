"""The runtime on a CPU shared with a busy process: a config reached by in-place switches
against the same config on a fresh process, under the runtime's OpenMP wait policy (passive,
set by `python -m ddtree_runtime serve`) and under OpenMP's own default (spin, then sleep).

A side-by-side `make run` (two sweeps on two cores) once measured a switched b4 k1 process at
0.8 tok/s where a fresh one ran 9.9; this reproduces that with one server and a 2-thread
matmul loop beside it. Each case is one server: `switched` starts AR with a captured graph,
measures, switches to AR without, measures, then switches to b4 k1 (graph on) as `make run`
does; `fresh` starts b4 k1 directly. Same greedy chat prompts as sweeps/local.yaml.

    python bench/cpu_contention.py [--no-hog]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import yaml

from ddtree_runtime.server.local_server import LocalServer

SPEC = Path(__file__).resolve().parents[1] / "sweeps" / "local.yaml"
BASE = ["--model", "smollm2-135m", "--draft", "ngram", "--device", "cpu"]
TREE = {"speculative": "ddtree", "budget": 4, "topk": 1, "block_size": 8, "cuda_graph": True}
HOG = "import torch\ntorch.set_num_threads(2)\na = torch.randn(384, 384)\nwhile True:\n    a @ a"
#: The runtime's own policy (the variable unset), and OpenMP's default: an empty value, which the
#: runtime keeps as the user's and libgomp reads as none given.
POLICIES = {"runtime (passive)": None, "OpenMP default": ""}


def tok_s(url: str, prompts: list[str]) -> tuple[float, float]:
    """(tok/s, ms per verify round) over the prompts, one at a time, greedy, 32 tokens."""
    tokens = rounds = 0
    start = time.perf_counter()
    for prompt in prompts:
        body = {"model": "smollm2-135m", "max_tokens": 32, "temperature": 0}
        body["messages"] = [{"role": "user", "content": prompt}]
        answer = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=600).json()
        tokens += answer["usage"]["completion_tokens"]
        rounds += answer["ddtree"]["verify_rounds"]
    seconds = time.perf_counter() - start
    return tokens / seconds, 1000 * seconds / rounds


def switch(url: str, body: dict) -> None:
    answer = httpx.post(f"{url}/admin/switch", json=body, timeout=300)
    answer.raise_for_status()


def switched(prompts: list[str]) -> tuple[float, float]:
    with LocalServer([*BASE, "--speculative", "none", "--cuda-graph"]) as server:
        server.wait_healthy()
        tok_s(server.url, prompts[:2])
        switch(server.url, {"cuda_graph": False})
        tok_s(server.url, prompts[:2])
        switch(server.url, TREE)
        return tok_s(server.url, prompts)


def fresh(prompts: list[str]) -> tuple[float, float]:
    flags: list[str] = []  # TREE as serve's flags (a true switch is a bare flag)
    for key, value in TREE.items():
        flag = f"--{key.replace('_', '-')}"
        flags += [flag] if value is True else [flag, str(value)]
    with LocalServer([*BASE, *flags]) as server:
        server.wait_healthy()
        return tok_s(server.url, prompts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--no-hog", action="store_true", help="nothing beside the server")
    a = ap.parse_args()
    prompts = [p["text"] for p in yaml.safe_load(SPEC.read_text())["workload"]["prompts"]]
    hog = None if a.no_hog else subprocess.Popen([sys.executable, "-c", HOG])
    try:
        print(f"{'OMP_WAIT_POLICY':>18} {'process':>9} {'tok/s':>6} {'ms/round':>9}")
        for label, value in POLICIES.items():
            os.environ.pop("OMP_WAIT_POLICY", None)
            if value is not None:
                os.environ["OMP_WAIT_POLICY"] = value
            for name, case in (("switched", switched), ("fresh", fresh)):
                rate, per_round = case(prompts)
                print(f"{label:>18} {name:>9} {rate:>6.2f} {per_round:>9.1f}", flush=True)
    finally:
        if hog is not None:
            hog.kill()
    beside = "nothing" if a.no_hog else "a 2-thread matmul loop"
    print(f"beside the server: {beside}; {os.cpu_count()} cpus")


if __name__ == "__main__":
    main()
