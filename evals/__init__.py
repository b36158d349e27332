"""The evaluation harness: play policies through any door with its door client, summarise,
report.

from env_core.settings import Settings
from evals import DoorSpec, OraclePolicy, evaluate, open_door

door = open_door(DoorSpec("mcp-stdio", Settings(data_dir="../shared/data/spider")))
result = evaluate(door, OraclePolicy(), n_episodes=50, seed=0, out_dir="runs/oracle")
print(result.summary.overall.success)
door.close()
"""

from evals.door_clients import DoorClient, DoorSpec, open_door
from evals.evaluate import EvalResult, evaluate
from evals.metrics import Summary, wilson_interval
from evals.policies import OraclePolicy, RandomPolicy
from evals.policy import EpisodeContext, Policy, ToolCall

__all__ = [
    "DoorClient",
    "DoorSpec",
    "EpisodeContext",
    "EvalResult",
    "OraclePolicy",
    "Policy",
    "RandomPolicy",
    "Summary",
    "ToolCall",
    "evaluate",
    "open_door",
    "wilson_interval",
]
