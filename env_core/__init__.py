"""The sqlenv engine: catalog, read-only executor, episodes, tools, answers, rewards, and the
episode manager."""
