"""The OpenAI-compatible server around the engine: everything between a socket and ``Engine``.

``serve`` (``python -m ddtree_runtime serve``: flags -> model + engine -> warm-up -> uvicorn),
``config`` (the effective flags, their fingerprint and the package's source hash; no torch),
``app`` (routes, errors, streaming), ``protocol`` (request models and the error shape),
``generation`` (request -> prompt ids + sampling params + the event stream), ``formatting``
(response bodies and logprobs), ``state`` (what ``/server_info`` reports) and ``engine_loop`` (the
one thread that steps the engine and hands events to requests: only a server needs it, the engine
itself is synchronous). ``local_server`` starts a real server process for tests and benchmarks.
The contract is README.md "Runtime HTTP API".
"""
