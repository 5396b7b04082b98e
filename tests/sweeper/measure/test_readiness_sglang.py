"""Readiness for `engine: sglang`: SGLang's /get_server_info must show the requested flags.

SGLang cannot run here (CUDA only), so a small real HTTP server process on loopback answers with
SGLang's endpoint shapes (/health, /get_server_info with server args) for the runtime's flags.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from sweeper.engines.argv import sglang_server_args
from sweeper.measure.readiness import ReadinessError, check_sglang_identity, wait_ready
from sweeper.plan import build_plan
from sweeper.services import Launch
from sweeper.services.process import ProcessService
from sweeper.spec import load_spec

ROOT = Path(__file__).resolve().parents[3]

# Answers like SGLang: server args by their snake_case names, ints as ints.
SGLANG_LIKE = """
import json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
port, args = int(sys.argv[1]), json.loads(sys.argv[2])
class H(BaseHTTPRequestHandler):
    def do_GET(self):
        body = {"/health": {}, "/get_server_info": {**args, "version": "0.5.23"}}.get(self.path)
        self.send_response(200 if body is not None else 404)
        self.end_headers()
        self.wfile.write(json.dumps(body or {}).encode())
    def log_message(self, *a):
        pass
HTTPServer(("127.0.0.1", port), H).serve_forever()
"""


def _b300_configs() -> tuple[dict, dict]:
    spec = load_spec(ROOT / "sweeps" / "b300.yaml")
    steps = build_plan(spec).hosts[0].steps
    ar = next(sc for sc, _ in steps if sc.engine_mode == "ar")
    dd = next(sc for sc, _ in steps if sc.engine_mode == "ddtree")
    return sglang_server_args(ar, spec.runtime), sglang_server_args(dd, spec.runtime)


def _as_sglang_reports(args: dict) -> dict:
    """SGLang reports numbers as numbers."""
    return {k: int(v) if isinstance(v, str) and v.isdigit() else v for k, v in args.items()}


def test_speculative_flags_become_server_args() -> None:
    ar, dd = _b300_configs()
    assert dd["speculative_algorithm"] == "DFLASH"
    assert {"speculative_num_draft_tokens", "speculative_eagle_topk", "tp_size"} <= set(dd)
    assert ar["speculative_algorithm"] is None and "speculative_num_draft_tokens" not in ar


def test_matching_server_args_pass_and_a_changed_one_fails() -> None:
    _, dd = _b300_configs()
    reported = _as_sglang_reports(dd)
    ident = check_sglang_identity(reported, launch_id="L", expected=dd)
    assert len(ident.fingerprint) == 64
    stale = {**reported, "speculative_eagle_topk": 99}
    with pytest.raises(
        ReadinessError, match="speculative_eagle_topk: requested '.*', server runs 99"
    ):
        check_sglang_identity(stale, launch_id="L", expected=dd)
    missing = {k: v for k, v in reported.items() if k != "tp_size"}
    with pytest.raises(ReadinessError, match="tp_size: requested '8', server does not report"):
        check_sglang_identity(missing, launch_id="L", expected=dd)


def test_ar_baseline_must_not_be_speculating() -> None:
    ar, _ = _b300_configs()
    speculating = {**_as_sglang_reports(ar), "speculative_algorithm": "DFLASH"}
    with pytest.raises(ReadinessError, match="speculative_algorithm"):
        check_sglang_identity(speculating, launch_id="L", expected=ar)


def test_wait_ready_reads_get_server_info(tmp_path: Path, port: int) -> None:
    _, dd = _b300_configs()
    script = tmp_path / "sglang_like.py"
    script.write_text(SGLANG_LIKE)
    svc = ProcessService(tmp_path / "svc")
    for reported, ok in ((_as_sglang_reports(dd), True), ({**dd, "tp_size": 4}, False)):
        argv = (sys.executable, str(script), str(port), json.dumps(reported))
        svc.start(Launch(argv=argv, port=port, launch_id="L"))
        try:
            if ok:
                ident, _ = wait_ready(
                    svc,
                    f"http://127.0.0.1:{port}",
                    launch_id="L",
                    expected=dd,
                    deadline_s=20,
                    engine="sglang",
                )
                assert ident.runtime_version == "0.5.23"
            else:
                with pytest.raises(ReadinessError, match="tp_size: requested '8', server runs 4"):
                    wait_ready(
                        svc,
                        f"http://127.0.0.1:{port}",
                        launch_id="L",
                        expected=dd,
                        deadline_s=20,
                        engine="sglang",
                    )
        finally:
            svc.stop(5)
