#!/bin/bash
# setup-report.sh - install what the report and nightly tests need (idempotent).
#
# chromium: tests/sweeper/test_report_browser.py opens reports in headless Chromium.
# cron:     tests/sweeper/test_cron.py edits a throwaway user's crontab with Debian's `crontab`.
# Neither is started here: the tests run chromium themselves and only edit crontab files.
set -euo pipefail

need=()
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || need+=(chromium)
command -v crontab >/dev/null 2>&1 || need+=(cron)

if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "setup-report: need root to install: ${need[*]} (those tests will skip)" >&2
    exit 0
  fi
  export DEBIAN_FRONTEND=noninteractive
  # dpkg may be busy with another apt run; wait for its lock instead of failing.
  apt-get -o DPkg::Lock::Timeout=300 update -qq
  apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends "${need[@]}"
fi
echo "setup-report: chromium and crontab present"
