"""provenance.py: a run's tree is clean only when it is its commit, and a dirty tree's difference, saved beside
the run under its hash, rebuilds that tree from the commit (checked with `git apply` in a fresh clone)."""

import hashlib
import json
import os
import subprocess

import pytest

import provenance


def git(root, *args):
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    (root / "model.py").write_text("width = 64\n")
    (root / ".gitignore").write_text("out*/\n")
    git(root, "add", ".")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first")
    return root


def test_a_clean_tree_records_its_commit_and_no_difference(repo, tmp_path, monkeypatch):
    monkeypatch.delenv("TP_SYNC_COMMIT", raising=False)
    (repo / "out-run").mkdir()
    (repo / "out-run" / "metrics.jsonl").write_text("{}\n")  # ignored files leave the tree clean
    info, diff = provenance.describe_run("cpu", 1, "float32", root=repo)
    assert info["git_commit"] == git(repo, "rev-parse", "HEAD").strip() == info["checkout_commit"]
    assert (info["git_dirty"], info["tree_diff_sha256"], diff) == (False, None, b"")
    out = tmp_path / "out"
    out.mkdir()
    assert provenance.write_run_files(str(out), {"seed": 1}, info, diff) is None
    assert sorted(os.listdir(out)) == ["config.json", "run_info.json"]
    assert json.loads((out / "run_info.json").read_text()) == info


def test_a_dirty_trees_difference_is_saved_under_its_hash_and_rebuilds_the_tree(repo, tmp_path, monkeypatch):
    monkeypatch.delenv("TP_SYNC_COMMIT", raising=False)
    monkeypatch.setattr(provenance, "UNTRACKED_KEPT_BYTES", 100)
    monkeypatch.setattr(provenance, "UNTRACKED_KEPT_FILES", 2)  # configs/mine.py first (Python), then dangling
    (repo / "model.py").write_text("width = 128\n")  # a tracked change
    (repo / "configs").mkdir()
    (repo / "configs" / "mine.py").write_text("n_embd = 128\n")  # an untracked file: the run imported or read it
    (repo / "weights.bin").write_bytes(bytes(range(256)) * 2)  # untracked and too large to keep: by name and size
    os.symlink("gone", repo / "dangling")  # a link to nothing: named, and the run still starts
    git(repo, "config", "color.ui", "always"), git(repo, "config", "diff.noprefix", "true")  # a user's settings
    for i in range(3):  # past UNTRACKED_KEPT_FILES: by name and size, after the Python files
        (repo / f"note{i}.txt").write_text("x\n")
    info, diff = provenance.describe_run("cpu", 1, "float32", root=repo)
    assert info["git_dirty"] is True and info["tree_diff_sha256"] == hashlib.sha256(diff).hexdigest()
    out = tmp_path / "out"
    out.mkdir()
    path = provenance.write_run_files(str(out), {}, info, diff)
    assert os.path.basename(path) == f"tree-{info['tree_diff_sha256'][:12]}.diff"
    with open(path, "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() == info["tree_diff_sha256"]
    assert "untracked weights.bin: 512 bytes (not kept)" in diff.decode() and "\x1b[" not in diff.decode()
    assert [line for line in diff.decode().splitlines() if line.startswith("untracked note")] == [
        f"untracked note{i}.txt: 2 bytes (not kept)" for i in range(3)]  # past the cap: configs/mine.py, then dangling
    assert "new file mode 120000" in diff.decode()  # the link, kept as a link
    rebuilt = tmp_path / "rebuilt"
    git(tmp_path, "clone", "-q", str(repo), str(rebuilt))
    git(rebuilt, "checkout", "-q", info["git_commit"])
    git(rebuilt, "apply", path)
    assert (rebuilt / "model.py").read_text() == "width = 128\n"
    assert (rebuilt / "configs" / "mine.py").read_text() == "n_embd = 128\n"
    # the same tree gives the same hash; another difference another one
    assert provenance.describe_run("cpu", 1, "float32", root=repo)[0]["tree_diff_sha256"] == info["tree_diff_sha256"]
    (repo / "configs" / "mine.py").write_text("n_embd = 256\n")
    assert provenance.describe_run("cpu", 1, "float32", root=repo)[0]["tree_diff_sha256"] != info["tree_diff_sha256"]


def test_a_nested_repository_alone_still_makes_the_tree_dirty(repo, monkeypatch):
    monkeypatch.delenv("TP_SYNC_COMMIT", raising=False)
    git(repo, "init", "-q", "vendored")  # git cannot diff a repository in the tree: named instead
    (repo / "vendored" / "lib.py").write_text("x = 1\n")
    info, diff = provenance.describe_run("cpu", 1, "float32", root=repo)
    assert info["git_dirty"] is True and diff.decode().startswith("untracked vendored/")


def test_a_copy_without_git_records_no_commit_and_no_verdict(tmp_path, monkeypatch):
    monkeypatch.setenv("TP_SYNC_COMMIT", "f" * 40)  # what a caller that sent the copy knows
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))  # git looks no higher than tmp_path for a repository
    (tmp_path / "copy").mkdir()
    info, diff = provenance.describe_run("cpu", 1, "float32", root=tmp_path / "copy")
    assert (info["git_commit"], info["git_commit_from"], info["checkout_commit"]) == ("f" * 40, "caller", None)
    assert (info["git_dirty"], info["tree_diff_sha256"], diff) == (None, None, b"")
