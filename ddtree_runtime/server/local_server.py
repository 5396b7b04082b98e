"""Start `python -m ddtree_runtime serve` as a child process on a free loopback port and wait until
it is healthy: for the server's own tests and benchmarks (the sweeper has its own services)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

SERVE_COMMAND = [sys.executable, "-m", "ddtree_runtime", "serve"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LocalServer:
    """One server process; its stdout+stderr go to a temp file (`log()`) so pipes never fill."""

    def __init__(self, flags: list[str], port: int | None = None) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.flags = flags
        # Kept open for the process's lifetime, closed and removed in stop().
        self._log = tempfile.NamedTemporaryFile(  # noqa: SIM115
            prefix="ddtree-serve-", suffix=".log", delete=False
        )
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen(
            [*SERVE_COMMAND, *flags, "--host", "127.0.0.1", "--port", str(self.port)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
        )

    def log(self) -> str:
        return Path(self._log.name).read_text(errors="replace")

    def wait_healthy(self, timeout_s: float = 180.0) -> LocalServer:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited {self.process.returncode}:\n{self.log()}")
            try:
                if httpx.get(f"{self.url}/health", timeout=2.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        log = self.log()  # stop() removes it
        self.stop()
        raise RuntimeError(f"server not healthy after {timeout_s} s:\n{log}")

    def terminate(self, timeout_s: float = 10.0) -> int:
        """SIGTERM and wait; returns the exit code (raises TimeoutExpired if it hangs)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=timeout_s)

    def stop(self) -> None:
        try:
            self.terminate()
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        finally:
            self._log.close()
            Path(self._log.name).unlink(missing_ok=True)

    def __enter__(self) -> LocalServer:
        return self.wait_healthy()

    def __exit__(self, *_: object) -> None:
        self.stop()
