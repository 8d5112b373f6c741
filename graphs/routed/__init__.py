"""The routed strategy: classify, then the calculator, small talk or the tool loop."""
