"""A real HTTP server on loopback that answers GET paths with crafted bodies, for testing how
an engine reads what a server reports (/server_info, /get_server_info, /metrics, /v1/models).

`serve({"/path": body, ...})` is a context manager yielding the base URL; a dict or list body is
sent as JSON, a str as text. `routes` may be changed while it runs (counters that move).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@contextmanager
def serve(routes: dict[str, Any]) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self.path not in routes:
                self.send_error(404)
                return
            body = routes[self.path]
            text = body if isinstance(body, str) else json.dumps(body)
            kind = "text/plain" if isinstance(body, str) else "application/json"
            data = text.encode()
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            """Quiet: tests read answers, not access logs."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
