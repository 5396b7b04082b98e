"""Discovery: each request feature against vLLM AR and n-gram, raw request/response."""

import json
import sys

import httpx

AR, NG = "http://127.0.0.1:18171", "http://127.0.0.1:18172"
M = ".cache/smollm2-hf"
P = "apple, banana, cherry, apple, banana, cherry, apple, banana,"
PJ = "Give a JSON object with a name and an age for a person:"
SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}
cases = {
    "base": {},
    "min_p": {"min_p": 0.1},
    "repetition_penalty": {"repetition_penalty": 1.3},
    "frequency_penalty": {"frequency_penalty": 1.0},
    "presence_penalty": {"presence_penalty": 1.0},
    "logit_bias+100": {"logit_bias": {"21285": 100}},
    "logit_bias-100": {"logit_bias": {"11977": -100}},
    "stop": {"stop": ["apple, apple, apple"]},
    "response_format": {
        "prompt": PJ,
        "response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": SCHEMA}},
    },
    "json_object": {"prompt": PJ, "response_format": {"type": "json_object"}},
    "structured_outputs.regex": {"structured_outputs": {"regex": "[0-9]+(, [0-9]+)*"}},
    "guided_regex(old)": {"guided_regex": "[0-9]+(, [0-9]+)*"},
    "regex(sglang)": {"regex": "[0-9]+(, [0-9]+)*"},
    "n2": {"n": 2},
    "logprobs5": {"logprobs": 5},
}
T = float(sys.argv[1]) if len(sys.argv) > 1 else 0.0
out = {}
with httpx.Client(timeout=300) as c:
    for name, extra in cases.items():
        for label, url in (("ar", AR), ("ngram", NG)):
            body = {
                "model": M,
                "prompt": P,
                "max_tokens": 24,
                "temperature": T,
                "return_token_ids": True,
            }
            if T > 0:
                body["seed"] = 7
            body.update(extra)
            r = c.post(url + "/v1/completions", json=body)
            if r.status_code != 200:
                res = {"status": r.status_code, "error": r.text[:400]}
            else:
                ch = r.json()["choices"]
                res = {
                    "status": 200,
                    "choices": [
                        {
                            "ids": x.get("token_ids"),
                            "text": x["text"],
                            "finish": x["finish_reason"],
                            "stop_reason": x.get("stop_reason"),
                            "has_lp": x.get("logprobs") is not None,
                        }
                        for x in ch
                    ],
                }
            out[f"{name}/{label}"] = {"request": extra, **res}
            print(name, label, json.dumps(res)[:300], flush=True)
with open(f"vllm_T{T}.json", "w") as sink:
    json.dump(out, sink, indent=1)
