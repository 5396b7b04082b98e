#!/bin/bash
# setup-slurm.sh - install Debian 12's Slurm 22.05 (slurmctld, slurmd, client, munge) for the
# slurm cluster tests (idempotent).
#
# tests/slurm_cluster.py boots one controller/login test host and two compute test hosts on a
# shared bridge; they run these binaries from this machine's root filesystem (overlay). This
# script only installs packages. It never configures or starts Slurm here: every test host writes
# its own /etc/slurm/slurm.conf and munge key into its overlay and enables exactly the units its
# role needs (the rest are masked in tests/testhosts.py, because installing the packages enables
# munge/slurmd/slurmctld in this machine's /etc, which every test host would otherwise start).
set -euo pipefail

need=()
for pkg in slurmctld slurmd slurm-client munge; do
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
fi

# Where this machine runs systemd, the postinst scripts started the daemons on the real machine
# (without a slurm.conf slurmctld/slurmd fail at once; munged runs idle). The tests never use
# them; stop them so they hold no ports, but leave the packages' enablement alone.
if [ -d /run/systemd/system ]; then
  systemctl stop slurmctld.service slurmd.service munge.service 2>/dev/null || true
fi
echo "setup-slurm: ok ($(dpkg-query -W -f='${Package} ${Version}' slurmctld 2>/dev/null || echo missing))"
