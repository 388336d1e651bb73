#!/usr/bin/env bash
# Make sure Debian's Chromium (for the browser tests) and a CJK font (for legible
# screenshots) are installed. Installs them with apt-get when run as root; otherwise
# says what to install and fails, so browser tests never silently skip.
set -euo pipefail

missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
# grep reads all of fc-list's output: with -q it stopped at the first match, fc-list died
# of SIGPIPE on its next write, and pipefail took the installed fonts for missing.
fc-list 2>/dev/null | grep -i "Noto Sans CJK" >/dev/null || missing+=(fonts-noto-cjk)
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "Browser tests need: ${missing[*]}. Install them with: sudo apt-get install ${missing[*]}" >&2
  exit 1
fi
echo "Installing ${missing[*]} from Debian's packages..."
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
command -v chromium >/dev/null
