"""The DDTree algorithm as pure, batched tensor functions: one module per stage of a verify round.

``tree`` builds the best-first draft trees, ``mask`` writes their attention mask and position ids,
``verify`` walks the target's choices (``sampling`` makes them), ``commit`` says which cache
positions the accepted path moves to, and ``cache`` holds the per-slot KV buffers it moves them in.
Nothing here knows about requests, threads or HTTP; ``ddtree_runtime.engine`` strings them together.
"""
