"""`sweeper doctor`: is each host of a spec ready to run a sweep? The checks of a local or SSH
host (`checks.py`: one `Check` per question) and of a Slurm cluster (`slurm.py`: its login host,
partition and a short allocation of its own, through the sweep's own allocation code).
"""
