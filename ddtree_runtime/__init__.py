"""DDTree runtime: a lossless, batched DDTree speculative-decoding engine and its server."""

__version__ = "0.2.0"
