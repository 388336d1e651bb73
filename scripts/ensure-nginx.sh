#!/usr/bin/env bash
# Make sure nginx is installed, so tests/deploy/test_config_files.py can check the example
# site in deploy/nginx/ with `nginx -t` (REQUIRE_SHARED_DEPLOYMENT=1 makes a missing nginx a
# failure). Installs Debian's nginx-light with apt-get when run as root; otherwise says
# what to install and fails. Nothing is started: the test runs `nginx -t` only.
set -euo pipefail

command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "The deployment tests need nginx. Install it with: sudo apt-get install nginx-light" >&2
  exit 1
fi
echo "Installing nginx-light from Debian's packages..."
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends nginx-light >/dev/null
[ -x /usr/sbin/nginx ]
