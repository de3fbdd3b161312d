"""`python bench/<tool>.py ...` (nanoGPT's habit) runs as `python -m bench.<tool> ...` does. The tools
import the repository's modules and each other as the package `bench`, which a script's own folder on
sys.path cannot give; a tool run as a script imports this module first (its __package__ is empty),
and this runs the tool again as the module it is, with the same arguments, and exits with its status."""

import os
import runpy
import sys

tool = os.path.splitext(os.path.basename(sys.argv[0]))[0]
sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the repository, not bench/
runpy.run_module(f"bench.{tool}", run_name="__main__", alter_sys=True)
sys.exit(0)
