"""Suite-wide pytest plugins: the disposable SSH + systemd test hosts (root-only fixtures)."""

pytest_plugins = ["tests.sweeper.testhost_fixture"]
