"""Rewards: a terminal reward for the answer plus small, bounded shaping for exploration.

Shaping per step = exploration potential gained - step cost - penalties, where the potential
Phi(s) = new_table_bonus * (tables explored, capped) + first_query_bonus * [a query succeeded].
Each step's shaping is clipped to +-max_step_shaping and the episode's running sum to
+-max_episode_shaping. With the defaults the worst correct episode (1 - 0.2) still beats the
best wrong one (0 + 0.2), so correctness dominates. With `refund_exploration` the potential
is paid back at the end (Phi(terminal) = 0): the exploration terms then telescope to zero and,
by Ng, Harada & Russell (1999), cannot change the optimal policy. Nothing here reads the gold
answer: shaping depends only on which calls were made and whether they succeeded.
"""

from __future__ import annotations

from dataclasses import dataclass


def booked(total: float, reward: float) -> float:
    """An episode's total with `reward` added, rounded at every step so that a total summed
    on either side of a door is the same number."""
    return round(total + reward, 6)


@dataclass(frozen=True)
class RewardConfig:
    correct: float = 1.0
    wrong: float = 0.0
    step_cost: float = 0.01
    new_table_bonus: float = 0.02
    max_tables_rewarded: int = 4
    first_query_bonus: float = 0.03
    repeat_penalty: float = 0.02
    error_penalty: float = 0.01
    max_step_shaping: float = 0.05
    max_episode_shaping: float = 0.2
    refund_exploration: bool = False

    def __post_init__(self) -> None:
        if self.correct - self.max_episode_shaping <= self.wrong + self.max_episode_shaping:
            raise ValueError(
                "correct - max_episode_shaping must exceed wrong + max_episode_shaping, "
                "or a wrong answer could outscore a right one"
            )

    @classmethod
    def profile(cls, name: str) -> RewardConfig:
        if name not in PROFILES:
            raise ValueError(f"unknown reward profile {name!r}; choose from {', '.join(PROFILES)}")
        return PROFILES[name]


PROFILES: dict[str, RewardConfig] = {
    "shaped": RewardConfig(),
    "potential": RewardConfig(
        step_cost=0.0, repeat_penalty=0.0, error_penalty=0.0, refund_exploration=True
    ),
    "sparse": RewardConfig(
        step_cost=0.0,
        new_table_bonus=0.0,
        first_query_bonus=0.0,
        repeat_penalty=0.0,
        error_penalty=0.0,
        max_step_shaping=0.0,
        max_episode_shaping=0.0,
    ),
}


class RewardTracker:
    """Turns one episode's calls into rewards; holds the exploration state it needs."""

    def __init__(self, config: RewardConfig) -> None:
        self.config = config
        self._tables: set[str] = set()
        self._queried = False
        self._calls: set[tuple[str, str]] = set()
        self.shaping_total = 0.0

    def _potential(self) -> float:
        c = self.config
        explored = min(len(self._tables), c.max_tables_rewarded)
        return c.new_table_bonus * explored + c.first_query_bonus * self._queried

    def step(self, tool: str, call_key: str, ok: bool, table: str | None = None) -> float:
        """Shaping for one non-terminal step. `table` is the table a describe/sample touched."""
        c = self.config
        before = self._potential()
        if ok and table is not None:
            self._tables.add(table.casefold())
        if ok and tool == "query":
            self._queried = True
        shaping = self._potential() - before - c.step_cost
        if (tool, call_key) in self._calls:
            shaping -= c.repeat_penalty
        self._calls.add((tool, call_key))
        if not ok:
            shaping -= c.error_penalty
        return self._bank(max(-c.max_step_shaping, min(c.max_step_shaping, shaping)))

    def terminal(self, correct: bool, book: bool = True) -> float:
        """The final step's reward: the answer's worth, less any exploration refund (banked
        unless `book` is false: the reward an ending now would give)."""
        c = self.config
        refund = self._bank(-self._potential(), book) if c.refund_exploration else 0.0
        return (c.correct if correct else c.wrong) + refund

    def _bank(self, shaping: float, book: bool = True) -> float:
        """Add shaping to the running sum, clipped so the sum stays within its bound."""
        limit = self.config.max_episode_shaping
        total = max(-limit, min(limit, self.shaping_total + shaping))
        granted = total - self.shaping_total
        if book:
            self.shaping_total = total
        return granted
