#!/usr/bin/env bash
# Install what the project needs into the active Python environment.
#   ./install.sh         train.py, the prepare scripts and bench/
#   ./install.sh test    the same, plus the test tools
# An installed torch is kept (a GPU machine's CUDA build stays as it is); one that is too old or does
# not import stops the install with one line. With no torch, torch==2.13.0 is installed: from a local CPU wheel where pip is set up to
# find one, else PyPI's default build for the platform.
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-$(command -v python || command -v python3)}
install() { "$PY" -m pip install --disable-pip-version-check -q "$@"; }
# Found by its package metadata, not by importing it: a torch that is there but does not import (a
# CUDA build missing its libraries), or is older than requirements.txt's torch>=2.6, is the user's to
# fix; pip would replace it with PyPI's build, not theirs.
have=$("$PY" -c "import importlib.metadata as m; print(m.version('torch'))" 2>/dev/null || true)
if [ -z "$have" ]; then
    echo "install.sh: no torch found, installing torch==2.13.0"
    install torch==2.13.0
elif ! "$PY" -c "import sys; v = sys.argv[1].split('.'); sys.exit(not (int(v[0]), int(v[1])) >= (2, 6))" "$have" 2>/dev/null; then
    echo "install.sh: torch $have is installed, this project needs torch>=2.6: upgrade it with the build for your CUDA (pytorch.org), or use a fresh environment" >&2
    exit 1
elif ! why=$("$PY" -c "import torch" 2>&1); then
    echo "install.sh: torch $have is installed but does not import ($(printf '%s' "$why" | tail -n 1)): repair it, or pip uninstall torch and run install.sh again" >&2
    exit 1
fi
case "${1:-}" in
    "") install -r requirements.txt ;;
    test) install -r requirements-test.txt ;;
    *) echo "install.sh: unknown argument '$1' (use no argument, or 'test')" >&2; exit 2 ;;
esac
"$PY" -c "import torch; print(f'install.sh: ready, torch {torch.__version__}')"
