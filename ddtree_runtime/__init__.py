"""DDTree runtime: a lossless, batched DDTree speculative-decoding engine and its server."""

__version__ = "0.1.0"
