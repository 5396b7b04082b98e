"""Default signal dispositions for a child a test will signal.

A process started in the background from a non-interactive shell (a CI runner, `nohup`, `cmd &`)
inherits SIGINT and SIGQUIT as ignored, and every child inherits that; Python then installs no
KeyboardInterrupt handler. The product is right to honour an inherited ignore, so a test that
sends a child Ctrl-C gives it the default dispositions itself instead of depending on whoever
started the suite: pass `preexec_fn=default_signals` to `subprocess.Popen`.
"""

from __future__ import annotations

import signal

#: What a shell may leave ignored, and tests send.
SIGNALS = (signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGHUP)


def default_signals() -> None:
    """Run in the child between fork and exec: every signal a test sends back to SIG_DFL."""
    for sig in SIGNALS:
        signal.signal(sig, signal.SIG_DFL)
