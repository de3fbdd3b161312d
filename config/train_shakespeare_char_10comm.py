# Char-level Shakespeare at CPU scale, TP=2 simulated: [spd*2,parallel,spd*3] x2: parallel blocks 2 and 8 = 10 sync points per pass
# (every parallel block's partials are synced by the spd block after it). An intermediate count
# between 12comm (spd x12) and 8comm, the parallel blocks spread evenly, as the seed guide asks
# ("test intermediate counts"). The CPU-scale twin of config/train_gpt2_10comm.py.

include("train_shakespeare_char.py")
tp_size = 2
block_types = "spd*2,parallel,spd*3"
out_dir = "out-shakespeare-char-10comm"
wandb_run_name = "shakespeare-char-10comm"
