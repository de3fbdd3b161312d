# GPT-2 124M on OpenWebText, TP=2 simulated: one parallel block (5), the rest spd = 11 sync points per pass: an intermediate
# count between 12comm and 8comm, the parallel blocks spread evenly (the seed guide's "test
# intermediate counts").
# launch as: torchrun --standalone --nproc_per_node=8 train.py config/train_gpt2_11comm.py --max_iters=20000

include("train_gpt2.py")
tp_size = 2
block_types = "spd*5,parallel,spd*6"
out_dir = "out-gpt2-11comm"
wandb_run_name = "gpt2-124M-11comm"
