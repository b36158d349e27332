"""Training with TRL: datasets, oracle transcripts for SFT, the SFT and GRPO entry points.

The training itself needs the `train` extra; without it, a command says so in one line, and
its `--help` still answers (the libraries load after the arguments are read).
"""
