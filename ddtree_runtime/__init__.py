"""DDTree runtime: a lossless, batched DDTree speculative-decoding engine and its OpenAI-compatible server."""

__version__ = "0.1.0"
