"""install.sh keeps the user's torch: one too old, or one that does not import, stops the install with
one line instead of being replaced by PyPI's build (which would lose a GPU machine's CUDA torch)."""

import os
import subprocess

import pytest

from conftest import ROOT


@pytest.mark.parametrize("version, body, said", [
    ("2.4.1+cu121", "", "torch 2.4.1+cu121 is installed, this project needs torch>=2.6"),
    ("2.13.0+cu128", "raise ImportError('libcudnn.so.9: cannot open shared object file')",
     "torch 2.13.0+cu128 is installed but does not import (ImportError: libcudnn.so.9: cannot open shared object file)")])
def test_install_stops_at_a_torch_it_must_not_replace(tmp_path, version, body, said):
    # a torch package and its metadata ahead of the real one on the path, as a user's environment has it
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text(body)
    info = tmp_path / f"torch-{version.split('+')[0]}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n")
    # pip may not reach any index or wheel: were install.sh to try to replace torch, it would fail, not install
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1"}
    result = subprocess.run(["bash", os.path.join(ROOT, "install.sh"), "test"], env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 1 and result.stdout == "", result.stdout + result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith(f"install.sh: {said}"), result.stderr
