"""Evaluate the oracle from Python: 20 demo episodes through the MCP server over stdio.

python docs/examples/evaluate_oracle.py runs/oracle-20
"""

import sys

from env_core.settings import Settings
from evals import DoorSpec, OraclePolicy, evaluate, open_door

door = open_door(DoorSpec("mcp-stdio", Settings()))  # Settings(data_dir="spider") for Spider
try:
    result = evaluate(door, OraclePolicy(), n_episodes=20, seed=0, out_dir=sys.argv[1])
finally:
    door.close()
print(result.summary.overall.success)
