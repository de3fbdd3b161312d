# Lost packets on a lent GPU (plan.md's amended host rule): sweep.py's runs, unchanged, with deterministic
# kernels in float32 (TF32 matmuls), so the reliable control can pair to exactly 0 there as it does on a CPU.
# Run through bench/studies/lost_packets/device.sh, which first checks that reruns are bit-identical.
exec(open("bench/studies/lost_packets/sweep.py").read())  # from the repository root, as every sweep runs
common = {**common, "deterministic": True, "dtype": "float32"}
