# Char-level Shakespeare at CPU scale, TP=2: tp x12 = 24 sync points per pass, each sending its partials in bfloat16
# (sync_dtype: half the bytes of float32, no scale; on a GPU under bf16 autocast a bfloat16 sync
# sends what 24comm sends): a rank's own contribution stays exact, the mirror
# exchange of the backward pass is sent alike (DESIGN section 8).

include("train_shakespeare_char.py")
tp_size = 2
block_types = "tp"
sync_dtype = "bfloat16"
out_dir = "out-shakespeare-char-24comm-bf16"
wandb_run_name = "shakespeare-char-24comm-bf16"
