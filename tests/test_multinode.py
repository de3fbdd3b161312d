"""Several nodes: two torchrun agents on this machine, rendezvousing over c10d as two nodes would
(the multi-node commands in docs/modes.md), one process each: TP=2 across the "nodes", and pipeline
stages across them. The run must be the single-agent run: the same losses, sync counts and packets."""

import os
import socket
import subprocess
import sys

import pytest

from bench.harness import LINKS, ROOT, link_args, records, torchrun
from conftest import SMALL


def free_port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def two_agents(args, timeout=600):
    """The two-node launch in docs/modes.md, both agents here: --nnodes=2 --nproc_per_node=1, c10d rendezvous."""
    port = free_port()
    command = [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc_per_node=1",
               "--rdzv_backend=c10d", f"--rdzv_endpoint=localhost:{port}", f"--rdzv_id=tp-sync-{port}",
               os.path.join(ROOT, "train.py"), *args]
    env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
    agents = [subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
              for _ in range(2)]
    try:
        outputs = [agent.communicate(timeout=timeout) for agent in agents]
    finally:
        for agent in agents:
            agent.kill()
    return [(agent.returncode, out, err) for agent, (out, err) in zip(agents, outputs)]


# slow, both: the launch across agents is what they test (seven interpreter starts); every number of a
# dist run is checked against sim in the fast tier (test_dist.py)
@pytest.mark.slow
def test_tp2_across_two_agents_equals_one_agent(char_data, tmp_path):
    args = [*SMALL, f"--data_dir={char_data}", "--block_types=tp,parallel", "--tp_size=2", "--tp_mode=dist",
            *link_args(LINKS["bernoulli"])]
    one = torchrun(2, *args, f"--out_dir={tmp_path / 'one'}", launcher=True)  # --standalone, as docs/modes.md says
    assert one.returncode == 0, one.stderr[-2000:]
    results = two_agents([*args, f"--out_dir={tmp_path / 'two'}"])
    for code, out, err in results:
        assert code == 0, err[-2000:]
    assert any("dp=1 x tp=2 (dist, 2 processes)" in out for _, out, _ in results)
    single, multi = records(tmp_path / "one"), records(tmp_path / "two")
    assert len(single) == len(multi) and len([r for r in single if "val_loss" not in r]) >= 5
    timing = {"ms_per_iter", "tokens_per_s", "time_s", "mfu"}
    for a, b in zip(single, multi):  # the same processes computing the same thing: equal, not close
        assert {k: v for k, v in a.items() if k not in timing} == {k: v for k, v in b.items() if k not in timing}


@pytest.mark.slow
def test_pipeline_stages_across_two_agents_equal_one_agent(char_data, tmp_path):
    """The pipeline launch across nodes in docs/modes.md: one stage per "node" (pp=2, `sim` TP inside each)."""
    args = [*SMALL, f"--data_dir={char_data}", "--block_types=spd,parallel", "--tp_size=2", "--pp_size=2",
            "--pp_split=4", "--gradient_accumulation_steps=2", *link_args(LINKS["bernoulli"])]
    one = torchrun(2, *args, f"--out_dir={tmp_path / 'one'}", launcher=True)  # --standalone, as docs/modes.md says
    assert one.returncode == 0, one.stderr[-2000:]
    results = two_agents([*args, f"--out_dir={tmp_path / 'two'}"])
    for code, out, err in results:
        assert code == 0, err[-2000:]
    assert any("dp=1 x pp=2 x tp=2 (sim, 2 processes)" in out for _, out, _ in results)
    single, multi = records(tmp_path / "one"), records(tmp_path / "two")
    assert len(single) == len(multi) and len([r for r in single if "val_loss" not in r]) >= 5
    timing = {"ms_per_iter", "tokens_per_s", "time_s", "mfu"}
    for a, b in zip(single, multi):
        assert {k: v for k, v in a.items() if k not in timing} == {k: v for k, v in b.items() if k not in timing}
