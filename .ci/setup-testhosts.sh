#!/bin/bash
# setup-testhosts.sh - install what the disposable SSH/systemd test hosts need (idempotent).
#
# The remote-host tests (tests/sweeper/test_ssh.py, test_systemd.py, test_remote_sweep.py, ...)
# boot throwaway hosts with tests/testhosts.py: network + pid/mount/uts/ipc/cgroup namespaces, an
# overlay root over this machine's /, systemd as PID 1 and the distro sshd. This script makes sure
# the packages exist; it never starts sshd on the real machine (the test hosts start their own).
set -euo pipefail

need=()
command -v sshd >/dev/null 2>&1 || [ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v ssh-keygen >/dev/null 2>&1 || need+=(openssh-client)
command -v unshare >/dev/null 2>&1 || need+=(util-linux)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
[ -x /lib/systemd/systemd ] || need+=(systemd)
command -v systemd-id128 >/dev/null 2>&1 || need+=(systemd)
[ -e /usr/share/dbus-1/system.conf ] || need+=(dbus)
command -v sudo >/dev/null 2>&1 || need+=(sudo)   # the non-root + sudo path of SystemdService

if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "setup-testhosts: need root to install: ${need[*]} (the root-only tests will skip)" >&2
    exit 0
  fi
  # dpkg may be busy with another apt run; wait for its lock instead of failing.
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=300 update -qq
  apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends "${need[@]}"
fi

# The package's postinst may have started sshd on the real machine (policy-rc.d permitting);
# the tests never use it. Leave it as the distro set it, but make sure host keys exist so the
# overlay copies sshd sees are complete.
[ -e /etc/ssh/ssh_host_ed25519_key ] || ssh-keygen -A >/dev/null 2>&1 || true
echo "setup-testhosts: ok (sshd $(ls /usr/sbin/sshd 2>/dev/null || echo missing))"
