#!/usr/bin/env bash
# The environment Aegra 0.11 needs to serve Waypoint's graphs (and tests/test_aegra.py to run them):
# Redis and PostgreSQL from Debian's packages, and a Python 3.12 venv with aegra-api and Waypoint.
# Usage: scripts/aegra_env.sh [VENV]   (default: .venv-aegra in the repository; apt needs root)
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:-.venv-aegra}
aegra_version=0.11.0

# Aegra >= 0.7 needs Python >= 3.12; on an older one pip quietly picks 0.6.0. Debian 12 has no 3.12
# package, so take pyenv's (its `python3.12` shim only answers when 3.12 is the selected version).
find_python312() {
    local candidate
    for candidate in "$(command -v python3.12 || true)" \
        "$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")"/versions/3.12*/bin/python3.12 \
        /usr/bin/python3.12 /usr/local/bin/python3.12; do
        if [[ -x $candidate ]] && "$candidate" -c 'import sys, venv; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; then
            echo "$candidate"
            return
        fi
    done
    echo "aegra_env: no Python 3.12 found (install one, e.g. pyenv install 3.12)" >&2
    exit 1
}

apt_install() {
    local missing=("$@")
    ((${#missing[@]})) || return 0
    export DEBIAN_FRONTEND=noninteractive
    # An install from the cached lists first: `apt-get update` only when they are stale.
    apt-get install -y -q "${missing[@]}" >/dev/null 2>&1 ||
        { apt-get update -q >/dev/null && apt-get install -y -q "${missing[@]}" >/dev/null; }
}

need_apt=()
command -v redis-server >/dev/null || need_apt+=(redis-server)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need_apt+=(postgresql)
apt_install "${need_apt[@]}"

installed() {
    "$venv/bin/python" -I - "$aegra_version" "$PWD" 2>/dev/null <<'PY'
import importlib.metadata, pathlib, sys
import app
assert importlib.metadata.version("aegra-api") == sys.argv[1]
assert pathlib.Path(app.__file__).resolve().parent == pathlib.Path(sys.argv[2]).resolve() / "app"
PY
}

if ! installed; then
    python312=$(find_python312)
    "$python312" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        "aegra-api==$aegra_version" -e '.[postgres]'
fi
"$venv/bin/python" -I -c "import importlib.metadata as m, sys; print('aegra-api', m.version('aegra-api'), 'on Python', sys.version.split()[0], 'in', sys.prefix)"
