"""The policies the harness ships: Random and Oracle here, the LLM policies in `evals.llm`."""

from evals.policies.oracle import OraclePolicy
from evals.policies.random_policy import RandomPolicy

__all__ = ["OraclePolicy", "RandomPolicy"]
