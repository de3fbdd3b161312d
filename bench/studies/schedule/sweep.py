# Sync schedules (issue 18): 24comm for the first 25% / 50% of training, then the seed guide's
# "8comm" pattern ([spd,parallel] x6, 7 syncs) to the end; 4 seeds. The two constant patterns
# they sit between, 24comm and 7comm throughout, are the 8-seed study's runs of the same seeds
# and settings (char_sync_study_8seeds: the same common overrides), so summarize the two together;
# schedule runs pair with 24comm of the same seed (block_schedule is a treatment key), and their
# sync_points column is the average syncs per step: 0.25*24 + 0.75*7 = 11.25, 0.5*24 + 0.5*7 = 15.5.
#   python -m bench.sweep bench/studies/schedule/sweep.py --slots 2
#   python -m bench.summarize bench/studies/schedule/runs bench/studies/sync_count/runs/shakespeare_char{_24comm,_7comm}-s[1-4] --out bench/studies/schedule
name = "char_schedule_study"
configs = ["config/train_shakespeare_char_24comm.py"]
seeds = [1, 2, 3, 4]
settings = {
    "to7comm-at150": {"block_schedule": "0:tp;150:spd,parallel"},
    "to7comm-at300": {"block_schedule": "0:tp;300:spd,parallel"},
}
common = {"compile": False, "eval_interval": 75, "eval_iters": 40}
