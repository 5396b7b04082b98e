"""Suite-wide pytest plugins: the disposable SSH + systemd test hosts and the Slurm cluster
(root-only fixtures), a throwaway PostgreSQL server (tests/postgres_server.py), the `root`
marker derived from them (tests/root_marker.py), CI's rule that no test may skip
(tests/ci_rules.py), how the suite shares the cores (tests/lanes.py: groups and the quiet
lane), and the session's own state directory (the local host's lease: tests/state_dir.py)."""

pytest_plugins = [
    "tests.ci_rules",
    "tests.lanes",
    "tests.state_dir",
    "tests.root_marker",
    "tests.sweeper.testhost_fixture",
    "tests.slurm_fixture",
    "tests.postgres_server",
]
