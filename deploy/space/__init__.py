"""sqlenv as a Hugging Face Space: the root of the folder scripts/stage-space.sh assembles."""
