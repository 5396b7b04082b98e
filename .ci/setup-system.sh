#!/bin/bash
# setup-system.sh - the one apt step: every Debian package the tests need, installed in a single
# `apt-get update` + `apt-get install` (idempotent).
#
# One step, not one per test area: apt serializes on two locks, dpkg's (DPkg::Lock::Timeout waits
# for it) and the package lists' (nothing waits for that one), so parallel `apt-get update`s fail
# with "Could not get lock /var/lib/apt/lists/lock". `.ci/run` runs this beside the pip-only steps,
# which never touch apt.
#
# What needs what:
#   test hosts (tests/testhosts.py: SSH, systemd, doctor, remote sweeps): openssh-server and
#     -client, util-linux (unshare), iproute2, systemd, dbus, sudo (SystemdService's sudo path)
#   Slurm cluster tests (tests/slurm_cluster.py): Debian 12's Slurm 22.05 (slurmctld, slurmd,
#     slurm-client, munge) and, for accounting, slurmdbd + mariadb-server
#   report and nightly tests: chromium (opens reports headless), cron (`crontab`)
#   history tests (tests/postgres_server.py): postgresql (a throwaway server per test session,
#     started with initdb/pg_ctl as the `postgres` user; the cluster the package makes is unused)
# Nothing is configured or started here: every test host writes its own config into its overlay
# and starts exactly the units its role needs.
set -euo pipefail

packages=(
  openssh-server openssh-client util-linux iproute2 systemd dbus sudo
  slurmctld slurmd slurm-client munge slurmdbd mariadb-server
  chromium cron
  postgresql
)
need=()
for pkg in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || need+=("$pkg")
done

if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "setup-system: need root to install: ${need[*]} (the tests that need them will skip)" >&2
    exit 0
  fi
  export DEBIAN_FRONTEND=noninteractive
  # Another apt on this machine (not ours: .ci/run runs only this one) may hold the lists lock for
  # a moment: retry the update rather than fail on it.
  for attempt in 1 2 3; do
    apt-get -o DPkg::Lock::Timeout=300 update -qq && break
    [ "$attempt" = 3 ] && exit 1
    sleep 10
  done
  apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends "${need[@]}"
  # Where this machine runs systemd, postinst scripts may have started daemons on the real machine
  # (the Slurm ones fail at once without their config; munged and MariaDB would run idle). The
  # tests never use them.
  if [ -d /run/systemd/system ]; then
    systemctl stop slurmctld.service slurmd.service slurmdbd.service munge.service \
      mariadb.service postgresql.service 2>/dev/null || true
  fi
fi

# Host keys must exist so the overlay copies each test host's sshd sees are complete.
[ -e /etc/ssh/ssh_host_ed25519_key ] || ssh-keygen -A >/dev/null
for tool in sshd unshare ip slurmctld chromium crontab pg_ctlcluster; do
  command -v "$tool" >/dev/null 2>&1 || [ -x "/usr/sbin/$tool" ] || { echo "setup-system: $tool missing after install" >&2; exit 1; }
done
echo "setup-system: ok (installed: ${need[*]:-nothing new})"
