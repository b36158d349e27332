"""Training on the environment with TRL: datasets, oracle SFT transcripts, SFT and GRPO."""
