"""The benchmark tools: run them from the repository root as `python -m bench.<tool>`."""
