"""The plan strategy (Plan-and-Solve): planner, executor, synthesizer."""
