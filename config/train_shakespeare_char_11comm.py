# Char-level Shakespeare at CPU scale, TP=2 simulated: one parallel block (5), the rest spd = 11 sync points per pass
# (every parallel block's partials are synced by the spd block after it). An intermediate count
# between 12comm (spd x12) and 8comm, the parallel blocks spread evenly, as the seed guide asks
# ("test intermediate counts"). The CPU-scale twin of config/train_gpt2_11comm.py.

include("train_shakespeare_char.py")
tp_size = 2
block_types = "spd*5,parallel,spd*6"
out_dir = "out-shakespeare-char-11comm"
wandb_run_name = "shakespeare-char-11comm"
