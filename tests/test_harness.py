"""A hung run costs minutes, not the suite: every test has a time limit (pytest.ini's `timeout`, pytest-timeout),
and a run the harness started that does not finish is ended with every process's Python stack printed, its own
and its children's (torchrun's ranks), before the failure is raised."""

import os
import subprocess
import sys
import time

import pytest

from bench.harness import descendants, ranks_here, run
from conftest import SMALL


def _running(marker):
    """The pids of live processes whose command line holds marker."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if marker.encode() in f.read() and int(entry) != os.getpid():
                    found.append(int(entry))
        except OSError:
            pass
    return found


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="descendants are read from Linux's /proc")
def test_a_hung_command_and_its_children_print_their_stacks_and_end(capsys):
    """A command whose child hangs (as a rank of torchrun would): both print where they are, neither survives."""
    # The parent waits until the child is in its function (it says so on a pipe): on a loaded host the
    # child's interpreter can take seconds to start, and a stack printed before that would not show it.
    child = "import time\ndef waiting_in_the_child(): print(flush=True); time.sleep(300)\nwaiting_in_the_child()"
    parent = (f"import subprocess, sys, time\nsubprocess.Popen([sys.executable, '-c', {child!r}], stdout=subprocess.PIPE).stdout.readline()\n"
              "def waiting_in_the_parent(): time.sleep(300)\nwaiting_in_the_parent()")
    with pytest.raises(subprocess.TimeoutExpired):
        run([sys.executable, "-c", parent], timeout=5)
    said = capsys.readouterr().err
    assert "did not finish" in said
    assert "in waiting_in_the_parent" in said and "in waiting_in_the_child" in said, said
    assert _running("waiting_in_the_child") == []


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="the test reads Linux's /proc")
def test_descendants_finds_grandchildren():
    code = "import subprocess, sys, time\nsubprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\ntime.sleep(60)"
    parent = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not descendants(parent.pid):
            time.sleep(0.05)
        children = descendants(parent.pid)
        assert len(children) == 1 and descendants(children[0]) == []
        assert parent.pid not in children and children[0] in descendants(os.getpid())
    finally:
        for pid in descendants(parent.pid):
            os.kill(pid, 9)
        parent.kill()
        parent.wait()


@pytest.mark.slow  # 15 s: the forkserver's start and a run of train.py, stopped
def test_hung_ranks_print_their_stacks_and_end(char_data, tmp_path, capsys):
    """torchrun's ranks forked by ranks_here, stopped by their deadline mid-run: each rank's stack is printed
    (faulthandler, from the rank's own stderr file)."""
    args = [*SMALL, f"--data_dir={char_data}", f"--out_dir={tmp_path}", "--tp_size=2", "--tp_mode=dist",
            "--max_iters=100000", "--eval_interval=100000"]
    with pytest.raises(subprocess.TimeoutExpired):
        ranks_here(2, args, timeout=15)
    said = capsys.readouterr().err
    for rank in (0, 1):
        assert f"harness: rank {rank} of a run that did not finish" in said
    assert said.count("most recent call first") >= 2, said[-3000:]
    assert "train.py" in said


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="an uncollected rank's status is read from Linux's /proc")
def test_ranks_that_finish_end_the_run_though_the_forkserver_never_reports_it(char_data, tmp_path, monkeypatch):
    """The forkserver that forks the ranks also reports their exits (through each process's sentinel). Here it
    is stopped (SIGSTOP) once both ranks have started, so no report comes: the ranks still train and end (as
    zombies nobody collects), and ranks_here returns their status, read from /proc, and their output instead of
    waiting until its deadline."""
    import multiprocessing.connection
    import multiprocessing.forkserver
    import signal
    stopped, wait = [], multiprocessing.connection.wait

    def stop_the_forkserver_then_wait(objects, timeout=None):  # on both ranks: Process.start polls one at a time
        if not stopped and len(objects) == 2:
            stopped.append(multiprocessing.forkserver._forkserver._forkserver_pid)
            os.kill(stopped[0], signal.SIGSTOP)
        return wait(objects, timeout)

    monkeypatch.setattr(multiprocessing.connection, "wait", stop_the_forkserver_then_wait)
    args = [*SMALL, f"--data_dir={char_data}", f"--out_dir={tmp_path}", "--tp_size=2", "--tp_mode=dist", "--max_iters=2"]
    try:
        result = ranks_here(2, args, timeout=90)
    finally:
        for pid in stopped:
            os.kill(pid, signal.SIGCONT)
    assert stopped, "ranks_here never waited on its ranks"
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.count("step 2:") == 1, result.stdout  # the last eval, logged by rank 0 alone
    assert os.path.exists(tmp_path / "ckpt.pt")
