"""The reflexion strategy: attempt (the tool loop as a subgraph), evaluate, reflect."""
