"""SGLang's own code as a test oracle for the sweeper's SGLang side.

The `*_oracle.py` scripts here run under a Python that has sglang==0.5.23 installed (its own
venv, `make sglang-venv`), read one JSON document on stdin and write one on stdout. They call
SGLang's argument parser and resolver, and its real OpenAI HTTP routes with a scripted scheduler
behind them, so a test can check what we send and parse against what SGLang itself does.
`oracle_process.py` runs them from the test venv; nothing in the test venv imports sglang.
"""
