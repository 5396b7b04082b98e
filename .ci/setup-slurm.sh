#!/bin/bash
# setup-slurm.sh - install Debian 12's Slurm 22.05 (slurmctld, slurmd, client, munge) and, for the
# accounting test, slurmdbd + MariaDB, for the slurm cluster tests (idempotent).
#
# tests/slurm_cluster.py boots one controller/login test host and two compute test hosts on a
# shared bridge; they run these binaries from this machine's root filesystem (overlay). This
# script only installs packages. It never configures Slurm here: every test host writes its own
# /etc/slurm and munge key into its overlay and enables exactly the units its role needs (the
# rest are masked in tests/testhost_base.py, because installing the packages enables munge,
# slurmd, slurmctld, slurmdbd and mariadb in this machine's /etc, which every test host shares).
set -euo pipefail

packages=(slurmctld slurmd slurm-client munge slurmdbd mariadb-server)
need=()
for pkg in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || need+=("$pkg")
done

if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "setup-slurm: need root to install: ${need[*]} (the slurm tests will skip)" >&2
    exit 0
  fi
  export DEBIAN_FRONTEND=noninteractive
  # dpkg may be busy with another apt run; wait for its lock instead of failing.
  apt-get -o DPkg::Lock::Timeout=300 update -qq
  apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends "${need[@]}"
  # Where this machine runs systemd, the postinst scripts may have started the daemons on the
  # real machine (slurmctld/slurmd/slurmdbd fail at once without their config; munged and
  # MariaDB would run idle). The tests never use them: stop what was just installed.
  if [ -d /run/systemd/system ]; then
    systemctl stop slurmctld.service slurmd.service slurmdbd.service munge.service \
      mariadb.service 2>/dev/null || true
  fi
fi
echo "setup-slurm: ok ($(dpkg-query -W -f='${Package} ${Version}' slurmctld 2>/dev/null || echo missing))"
