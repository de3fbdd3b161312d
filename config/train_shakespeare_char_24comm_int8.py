# Char-level Shakespeare at CPU scale, TP=2: tp x12 = 24 sync points per pass, each sending its partials in int8
# (sync_dtype; int8 with a per-token absmax scale): a rank's own contribution stays exact, the mirror
# exchange of the backward pass is sent alike (DESIGN section 8).

include("train_shakespeare_char.py")
tp_size = 2
block_types = "tp"
sync_dtype = "int8"
out_dir = "out-shakespeare-char-24comm-int8"
wandb_run_name = "shakespeare-char-24comm-int8"
