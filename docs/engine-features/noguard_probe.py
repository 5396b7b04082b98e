"""vLLM 0.32.0 n-gram with the spec-decode guard removed (a fork as in PR #42802): the probes."""

import httpx

from sweeper.config.features import BY_NAME
from sweeper.engines.base import RequestSpec
from sweeper.engines.vllm import VLLM
from sweeper.plan import build_plan
from sweeper.spec import load_spec

spec = load_spec("sweeps/vllm-cpu.yaml")
engine = VLLM(spec.runtime)
cfg = build_plan(spec).hosts[0].steps[-1].server_config
M = spec.runtime.model
P = "apple, banana, cherry, apple, banana, cherry, apple, banana,"
with httpx.Client(timeout=600) as c:
    for url in ("http://127.0.0.1:18173",):
        for bias in ({"21285": 100}, {"11977": -100}):
            body = {
                "model": M,
                "prompt": P,
                "max_tokens": 24,
                "temperature": 0,
                "logit_bias": bias,
                "return_token_ids": True,
            }
            r = c.post(url + "/v1/completions", json=body).json()
            print(url, bias, r["choices"][0]["token_ids"], repr(r["choices"][0]["text"]))
    probe = RequestSpec("p", P, 8, 0.0)
    b = engine.bind(engine.negotiate(c, "http://127.0.0.1:18173", cfg, probe, M))
    for n, v in (("logit_bias", {11977: 5.0}), ("min_p", 0.1)):
        print(
            n,
            b.negotiate_features(
                c, "http://127.0.0.1:18173", cfg, probe, {n: BY_NAME[n].freeze(v)}, M, "0.32.0"
            ),
        )
    m = c.get("http://127.0.0.1:18173/metrics").text
    print(
        [
            line
            for line in m.splitlines()
            if line.startswith("vllm:spec_decode_num_accepted_tokens_total")
            or line.startswith("vllm:spec_decode_num_draft_tokens_total")
        ]
    )
