# GPT-2 124M on OpenWebText, TP=2 simulated: [spd*2,parallel,spd*3] x2: parallel blocks 2 and 8 = 10 sync points per pass: an intermediate
# count between 12comm and 8comm, the parallel blocks spread evenly (the seed guide's "test
# intermediate counts").
# launch as: torchrun --standalone --nproc_per_node=8 train.py config/train_gpt2_10comm.py --max_iters=20000

include("train_gpt2.py")
tp_size = 2
block_types = "spd*2,parallel,spd*3"
out_dir = "out-gpt2-10comm"
wandb_run_name = "gpt2-124M-10comm"
