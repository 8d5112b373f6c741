"""Benchmarks of the agent machinery (graph, checkpoints, rendering) against plain LangGraph.

`python -m bench [--quick] [--json FILE]`; every figure is reported next to a baseline measured in
the same run, as a ratio. This package imports nothing heavy, so its subprocesses start clean.
"""
