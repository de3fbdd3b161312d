#!/usr/bin/env bash
# Install what the project needs into the active Python environment.
#   ./install.sh         train.py, the prepare scripts and bench/
#   ./install.sh test    the same, plus the test tools
# An installed torch is kept (a GPU machine's CUDA build stays as it is). With no
# torch, torch==2.13.0 is installed: from a local CPU wheel where pip is set up to
# find one, else PyPI's default build for the platform.
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-$(command -v python || command -v python3)}
install() { "$PY" -m pip install --disable-pip-version-check -q "$@"; }
if ! "$PY" -c "import torch" 2>/dev/null; then
    echo "install.sh: no torch found, installing torch==2.13.0"
    install torch==2.13.0
fi
case "${1:-}" in
    "") install -r requirements.txt ;;
    test) install -r requirements-test.txt ;;
    *) echo "install.sh: unknown argument '$1' (use no argument, or 'test')" >&2; exit 2 ;;
esac
"$PY" -c "import torch; print(f'install.sh: ready, torch {torch.__version__}')"
