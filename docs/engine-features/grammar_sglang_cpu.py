"""SGLang 0.5.15 on this CPU: one grammar request (native `json_schema`), its answer, and the
scheduler's own log lines about it. Run last against a server started as
`sweeps/sglang-cpu.yaml` renders it: the request kills the scheduler.

    python docs/engine-features/grammar_sglang_cpu.py URL SERVER_LOG > sglang-0.5.15-grammar-cpu.txt
"""

import json
import sys
import time

import httpx

url, log = sys.argv[1], sys.argv[2]
schema = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}
info = httpx.get(url + "/server_info", timeout=30).json()
print("server_info:", {k: info.get(k) for k in ("version", "device", "grammar_backend")})
body = {
    "text": "Give a JSON object with a name and an age for a person:",
    "sampling_params": {"max_new_tokens": 16, "temperature": 0, "json_schema": json.dumps(schema)},
}
print("request: POST /generate", json.dumps(body))
try:
    answer = httpx.post(url + "/generate", json=body, timeout=300)
    print("answer:", answer.status_code, answer.text[:500])
except httpx.HTTPError as exc:
    print("answer: no HTTP answer:", repr(exc))
time.sleep(5)
try:
    print("health after:", httpx.get(url + "/health", timeout=10).status_code)
except httpx.HTTPError as exc:
    print("health after: no answer:", repr(exc))
with open(log, errors="replace") as fh:
    lines = [line.rstrip() for line in fh]
errors = [line for line in lines if "Error" in line or "Unsupported" in line]
print("server log, its error lines (last 12):")
print("\n".join(errors[-12:]))
start = max((i for i, line in enumerate(lines) if "Traceback" in line), default=len(lines))
end = next((i for i in range(start, len(lines)) if lines[i].startswith("RuntimeError")), start)
print("\nserver log, the scheduler's traceback:")
print("\n".join(line[:220] for line in lines[start : end + 1]))
