# GPT-2 124M on OpenWebText, TP=2 simulated: [spd,parallel,spd*2] x3: parallel blocks 1, 5 and 9 = 9 sync points per pass: an intermediate
# count between 12comm and 8comm, the parallel blocks spread evenly (the seed guide's "test
# intermediate counts").
# launch as: torchrun --standalone --nproc_per_node=8 train.py config/train_gpt2_9comm.py --max_iters=20000

include("train_gpt2.py")
tp_size = 2
block_types = "spd,parallel,spd*2"
out_dir = "out-gpt2-9comm"
wandb_run_name = "gpt2-124M-9comm"
