#!/usr/bin/env bash
# Installs the headless browser the console's browser tests drive (crates/quiver-console/tests/
# browser.rs): Debian's Chromium, its WebDriver (chromedriver) and a CJK font so Chinese renders.
#
#   scripts/install-browser.sh
#
# Versions are pinned to what `apt-cache policy` showed (after `apt-get update`) on Debian 12
# (bookworm, with bookworm-security) on 2026-12-03. Debian keeps only the newest security build
# of Chromium in its archive, so when a newer one replaces it the install fails with "Version
# ... was not found": update the pin here to what `apt-cache policy chromium` then shows. Needs
# root (or sudo) and Debian's archive. Idempotent: packages already installed at the pinned
# version are left alone.
set -euo pipefail

packages=(
    "chromium=156.0.8078.114-1~deb12u1"
    "chromium-driver=156.0.8078.114-1~deb12u1"
    "fonts-wqy-microhei=0.2.0-beta-3.1"
)

missing=()
for spec in "${packages[@]}"; do
    name="${spec%%=*}"
    want="${spec#*=}"
    have="$(dpkg-query -W -f='${Status} ${Version}' "$name" 2>/dev/null || true)"
    if [ "$have" != "install ok installed $want" ]; then
        missing+=("$spec")
    fi
done

if [ "${#missing[@]}" -eq 0 ]; then
    echo "browser already installed: ${packages[*]}" >&2
else
    sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null 2>&1 || { echo "error: need root or sudo to apt-get install" >&2; exit 1; }
        sudo=(sudo)
    fi
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

chromium --version >&2
chromedriver --version >&2
