#!/usr/bin/env bash
# Installs the headless browser the console's browser tests drive (crates/quiver-console/tests/
# browser.rs): Debian's Chromium, its WebDriver (chromedriver) and a CJK font so Chinese renders.
#
#   scripts/install-browser.sh
#
# Versions are pinned to what `apt-cache policy` showed (after `apt-get update`) on Debian 12
# (bookworm, with bookworm-security). Debian keeps only the newest security build of Chromium in
# its archive and drops the one before (156.0.8078.114 was gone four days after it was pinned),
# so Chromium is pinned to its upstream branch (`CHROMIUM_BRANCH`): the exact build below when
# the archive still has it, else the newest build of that same branch it has, named on stderr.
# chromedriver always gets the very version Chromium got. A branch the archive no longer has
# fails with a message: update the pins to what `apt-cache policy chromium` then shows. Needs
# root (or sudo) and Debian's archive. Idempotent: packages already installed at the chosen
# version are left alone.
set -euo pipefail

CHROMIUM_BRANCH="156.0.8078."
CHROMIUM_BUILD="156.0.8078.129-1~deb12u1"
FONT="fonts-wqy-microhei=0.2.0-beta-3.1"

sudo=()
if [ "$(id -u)" -ne 0 ]; then
    sudo=(sudo)
fi

# The versions on stdin that belong to the pinned branch.
of_branch() {
    awk -v branch="$CHROMIUM_BRANCH" 'index($0, branch) == 1'
}

# The Chromium build to install: the pinned one if installed or in the archive, else the newest
# of the same branch in the archive.
chromium_version() {
    local installed
    installed="$(dpkg-query -W -f='${Status} ${Version}' chromium 2>/dev/null || true)"
    case "$installed" in
        "install ok installed $CHROMIUM_BRANCH"*) echo "${installed##* }"; return ;;
    esac
    local available
    available="$(apt-cache madison chromium 2>/dev/null | awk -F'|' '{gsub(/ /,"",$2); print $2}')"
    if [ -z "$(of_branch <<<"$available")" ]; then
        "${sudo[@]}" apt-get update -qq
        available="$(apt-cache madison chromium 2>/dev/null | awk -F'|' '{gsub(/ /,"",$2); print $2}')"
    fi
    if grep -qxF "$CHROMIUM_BUILD" <<<"$available"; then
        echo "$CHROMIUM_BUILD"
        return
    fi
    local same_branch
    same_branch="$(of_branch <<<"$available" | sort -V | tail -n 1)"
    if [ -z "$same_branch" ]; then
        echo "error: Debian's archive has no Chromium of branch ${CHROMIUM_BRANCH}* (it has: $(tr '\n' ' ' <<<"$available")); update CHROMIUM_BRANCH and CHROMIUM_BUILD in $0" >&2
        exit 1
    fi
    echo "note: Chromium $CHROMIUM_BUILD is no longer in Debian's archive; installing $same_branch of the same branch" >&2
    echo "$same_branch"
}

chromium="$(chromium_version)"
packages=(
    "chromium=$chromium"
    "chromium-driver=$chromium"
    "$FONT"
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
    if [ "${#sudo[@]}" -ne 0 ] && ! command -v sudo >/dev/null 2>&1; then
        echo "error: need root or sudo to apt-get install" >&2
        exit 1
    fi
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

chromium --version >&2
chromedriver --version >&2
