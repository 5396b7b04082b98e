"""DDTree Sweeper: deploys the DDTree runtime, sweeps its configs, proves exactness and reports."""

__version__ = "0.1.0"
