#!/usr/bin/env bash
# System packages the test suite uses beyond the virtualenv:
#   chromium   headless browser for the service's results-page test (tests/service, marker `browser`),
#              driven through playwright with executable_path=/usr/bin/chromium (no browser download)
#   fonts-dejavu-core  a font for the page's text in screenshots
#   docker-compose     validates docker-compose.yml (tests/kafka/test_demo.py)
# Idempotent: does nothing when everything is present. Needs root (or sudo) and Debian's apt.
set -euo pipefail

missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
[ -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || missing+=(fonts-dejavu-core)  # legible screenshots
# docker-compose (v1, Debian) validates docker-compose.yml offline (`docker-compose config`) for the
# Kafka demo test when neither a Docker engine nor the Compose v2 plugin is there
command -v docker-compose >/dev/null || docker compose version >/dev/null 2>&1 || missing+=(docker-compose)

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup_system: nothing to install"
  exit 0
fi

if [ "$(id -u)" -eq 0 ]; then sudo=""; elif command -v sudo >/dev/null; then sudo="sudo"; else
  echo "setup_system: need root to apt-get install ${missing[*]}" >&2
  exit 1
fi
echo "setup_system: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
