"""Suite-wide pytest plugins: the disposable SSH + systemd test hosts and the Slurm cluster
(root-only fixtures)."""

pytest_plugins = ["tests.sweeper.testhost_fixture", "tests.slurm_fixture"]
