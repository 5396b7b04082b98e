"""Suite-wide pytest plugins: the disposable SSH + systemd test hosts and the Slurm cluster
(root-only fixtures), and CI's rule that no test may skip (tests/ci_rules.py)."""

pytest_plugins = ["tests.ci_rules", "tests.sweeper.testhost_fixture", "tests.slurm_fixture"]
