# The sync-count study at CPU scale: char-level Shakespeare, the dense config and all
# seven sync-count configs, 3 seeds each, 600 iterations (the configs' own setting).
#   python bench/sweep.py bench/sweeps/char_sync_study.py --slots 2
name = "char_sync_study"
configs = ["config/train_shakespeare_char.py"] + [
    f"config/train_shakespeare_char_{n}comm.py" for n in (24, 18, 16, 12, 8, 6, 2)]
seeds = [1, 2, 3]
settings = {"": {}}
common = {"compile": False, "eval_interval": 100}
