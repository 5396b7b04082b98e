"""Discovery: each request feature against SGLang 0.5.15 AR, native /generate and OpenAI."""

import json
import sys

import httpx

U = "http://127.0.0.1:18190"
P = "apple, banana, cherry, apple, banana, cherry, apple, banana,"
PJ = "Give a JSON object with a name and an age for a person:"
SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}
T = float(sys.argv[1]) if len(sys.argv) > 1 else 0.0
native = {
    "base": {},
    "min_p": {"min_p": 0.1},
    "repetition_penalty": {"repetition_penalty": 1.3},
    "frequency_penalty": {"frequency_penalty": 1.0},
    "presence_penalty": {"presence_penalty": 1.0},
    "logit_bias+100": {"logit_bias": {"21285": 100}},
    "logit_bias-100": {"logit_bias": {"11977": -100}},
    "stop": {"stop": ["apple, apple, apple"]},
    "json_schema": {"json_schema": json.dumps(SCHEMA), "@prompt": PJ},
    "regex": {"regex": "[0-9]+(, [0-9]+)*"},
    "n2": {"n": 2},
    "unknown_field": {"bogus_param": 1},
}
out = {}
with httpx.Client(timeout=600) as c:
    ids = c.post(U + "/tokenize", json={"prompt": P}).json()
    print("tokenize", ids)
    for name, extra in native.items():
        extra = dict(extra)
        prompt = extra.pop("@prompt", P)
        sp = {"max_new_tokens": 24, "temperature": T, **extra}
        if T > 0:
            sp["sampling_seed"] = 7
        body = {"text": prompt, "sampling_params": sp}
        r = c.post(U + "/generate", json=body)
        if r.status_code != 200:
            res = {"status": r.status_code, "error": r.text[:400]}
        else:
            j = r.json()
            j = j if isinstance(j, list) else [j]
            res = {
                "status": 200,
                "choices": [
                    {
                        "ids": x.get("output_ids"),
                        "text": x["text"],
                        "finish": x["meta_info"].get("finish_reason"),
                    }
                    for x in j
                ],
            }
        out[f"native/{name}"] = {"request": sp, **res}
        print("native", name, json.dumps(res)[:300], flush=True)
    # logprobs on native
    body = {
        "text": P,
        "sampling_params": {"max_new_tokens": 24, "temperature": T},
        "return_logprob": True,
        "top_logprobs_num": 5,
        "logprob_start_len": -1,
    }
    r = c.post(U + "/generate", json=body).json()
    res = {"ids": r["output_ids"], "n_top": len(r["meta_info"]["output_top_logprobs"][0])}
    out["native/logprobs5"] = {"request": body, **res}
    print("native logprobs5", json.dumps(res)[:300])
    openai = {
        "base": {},
        "min_p": {"min_p": 0.1},
        "repetition_penalty": {"repetition_penalty": 1.3},
        "logit_bias+100": {"logit_bias": {"21285": 100}},
        "stop": {"stop": ["apple, apple, apple"]},
        "response_format": {
            "prompt": PJ,
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "p", "schema": SCHEMA},
            },
        },
        "json_object": {"prompt": PJ, "response_format": {"type": "json_object"}},
        "regex": {"regex": "[0-9]+(, [0-9]+)*"},
        "n2": {"n": 2},
        "logprobs5": {"logprobs": 5},
    }
    for name, extra in openai.items():
        body = {"model": "m", "prompt": P, "max_tokens": 24, "temperature": T, **extra}
        if T > 0:
            body["seed"] = 7
        r = c.post(U + "/v1/completions", json=body)
        if r.status_code != 200:
            res = {"status": r.status_code, "error": r.text[:400]}
        else:
            res = {
                "status": 200,
                "choices": [
                    {
                        "text": x["text"],
                        "finish": x["finish_reason"],
                        "has_lp": x.get("logprobs") is not None,
                    }
                    for x in r.json()["choices"]
                ],
            }
        out[f"openai/{name}"] = {"request": extra, **res}
        print("openai", name, json.dumps(res)[:300], flush=True)
with open(f"sglang_T{T}.json", "w") as sink:
    json.dump(out, sink, indent=1)
