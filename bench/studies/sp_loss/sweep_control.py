# The control of the SP loss study (plan.md): lossless sequence parallelism at the first seed, which must equal
# the study's lossless all-reduce run of the same config and seed bit for bit (every logged loss), before
# any lossy result is read. Same settings as sweep.py.
#   python -m bench.sweep bench/studies/sp_loss/sweep_control.py --slots 2 --threads 1 --no_summary
name = "sp_loss"
configs = ["config/train_shakespeare_char_24comm.py", "config/train_shakespeare_char_12comm.py"]
seeds = [400]
settings = {"lossless_sp": {"sequence_parallel": True}}
common = {"compile": False, "dtype": "float32", "eval_interval": 75, "eval_iters": 40}
