"""The reward audit: evidence, without a GPU, that a reward profile is a sound learning signal.

For each profile, every question of the split is played in process, through the engine's real
episodes, by the oracle, by a near miss (the oracle's exploration ending with a wrong answer)
and by degenerate strategies that try to earn reward without answering correctly. An episode is
scored as GRPO scores it (`SQLEnvTRL.get_reward`): its total reward once an unanswered episode
has been ended with the wrong-answer reward. Then three checks:

1. No strategy out-earns, in an episode it gets wrong, the cheapest correct episode.
2. A noisy oracle's mean episode reward rises strictly with its skill. At skill s a question is
   solved (the oracle's episode) when its rank in a seeded order is within the first s of the
   questions, and otherwise missed (the near miss's episode); so each level solves exactly
   round(s * n) questions, the ones a lower level solves and more.
3. GRPO learns only from groups whose rewards differ: the share of such groups, one group of 8
   rollouts per question by a policy of a skill level drawn for the group (each rollout a solve
   with that probability, else a wrong behaviour drawn at random). Reported, not checked: it
   measures how much signal a profile gives where every rollout fails, which a sparse profile
   trades for simplicity.

Each behaviour is played once per question and profile; the skill levels and groups draw from
those episodes (the engine is deterministic, so replaying an episode gives the same reward).
"""

from __future__ import annotations

import itertools
import json
import math
import random
import textwrap
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from statistics import fmean, stdev
from typing import Any

from env_core.calls import Play, ToolCall, drive
from env_core.catalog import Question
from env_core.episode import MAX_ANSWER_CHARS
from env_core.factory import load_catalog
from env_core.manager import EpisodeManager
from env_core.oracle import oracle_calls
from env_core.read_only import quote_identifier
from env_core.rewards import RewardConfig
from env_core.settings import Settings
from evals.metrics import Z_95
from evals.policies import OraclePolicy
from evals.policy import EpisodeContext

SKILL_LEVELS = tuple(round(0.1 * tenth, 1) for tenth in range(11))
GROUP_SIZE = 8
GUESS = "0"

Strategy = Callable[[EpisodeContext], Play]


def _harmless_calls(context: EpisodeContext) -> Iterator[ToolCall]:
    """Calls that always succeed and learn nothing new after the first round, forever."""
    while True:
        for table in context.start.tables:
            yield ToolCall("describe", {"table": table})
            yield ToolCall("sample", {"table": table})
            yield ToolCall("query", {"sql": f"SELECT count(*) FROM {quote_identifier(table)}"})


def never_answer(context: EpisodeContext) -> Play:
    yield from _harmless_calls(context)


def describe_every_table(context: EpisodeContext) -> Play:
    for table in context.start.tables:
        yield ToolCall("describe", {"table": table})


def repeat_one_query(context: EpisodeContext) -> Play:
    while True:
        yield ToolCall("query", {"sql": "SELECT 1"})


def spam_trivial_queries(context: EpisodeContext) -> Play:
    for number in itertools.count():
        yield ToolCall("query", {"sql": f"SELECT {number}"})


def guess_at_once(context: EpisodeContext) -> Play:
    yield ToolCall("answer", {"value": GUESS})


def answer_empty_list(context: EpisodeContext) -> Play:
    yield ToolCall("answer", {"value": "[]"})


def _huge_list() -> str:
    """The longest JSON list of 0, 1, 2, ... that an answer may hold."""
    numbers: list[int] = []
    while len(json.dumps([*numbers, len(numbers)])) <= MAX_ANSWER_CHARS:
        numbers.append(len(numbers))
    return json.dumps(numbers)


HUGE_LIST = _huge_list()


def answer_huge_list(context: EpisodeContext) -> Play:
    yield ToolCall("answer", {"value": HUGE_LIST})


def guess_after_the_budget(context: EpisodeContext) -> Play:
    """Explore until one step is left, then guess."""
    calls = _harmless_calls(context)
    for _ in range(context.start.budget - 1):
        yield next(calls)
    yield ToolCall("answer", {"value": GUESS})


def near_miss(context: EpisodeContext) -> Play:
    """The oracle's calls, with its answer made wrong: a row dropped, or a value changed."""
    calls = oracle_calls(context.question, context.start.budget, context.max_rows)
    call = next(calls)
    while call.tool != "answer":
        call = calls.send((yield call))
    rows = json.loads(call.arguments["value"])
    yield ToolCall("answer", {"value": json.dumps(_missed(rows))})


def _missed(rows: list[list[Any]]) -> list[list[Any]]:
    if len(rows) > 1:
        return rows[:-1]
    value = rows[0][0]
    if isinstance(value, int | float) and not isinstance(value, bool):
        changed: Any = value + abs(value) + 1  # beyond any tolerance
    elif isinstance(value, str):
        changed = value + " (not)"
    else:
        changed = 1
    return [[changed, *rows[0][1:]]]


DEGENERATE: dict[str, Strategy] = {
    "never answer": never_answer,
    "describe every table": describe_every_table,
    "repeat one query": repeat_one_query,
    "spam trivial queries": spam_trivial_queries,
    "guess at once": guess_at_once,
    "answer an empty list": answer_empty_list,
    "answer a huge list": answer_huge_list,
    "guess after the budget": guess_after_the_budget,
}
BEHAVIOURS: dict[str, Strategy] = {
    "oracle": OraclePolicy().play,
    "near miss": near_miss,
    **DEGENERATE,
}
WRONG_BEHAVIOURS = tuple(name for name in BEHAVIOURS if name != "oracle")


@dataclass(frozen=True)
class Outcome:
    reward: float
    correct: bool


def play(manager: EpisodeManager, question: Question, strategy: Strategy) -> Outcome:
    """One episode of `strategy`, scored as GRPO scores it."""
    episode = manager.create(question_id=question.id)
    try:
        max_rows = manager.limits.max_rows
        context = EpisodeContext(episode.start, question, random.Random(0), max_rows=max_rows)
        drive(
            strategy(context),
            lambda call: manager.step(episode.episode_id, call.tool, call.arguments),
            max_calls=episode.max_steps,
        )
        episode.abandon()
        return Outcome(episode.total_reward, bool(episode.correct))
    finally:
        manager.close(episode.episode_id)


@dataclass(frozen=True)
class Mean:
    value: float
    low: float
    high: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Mean:
        centre = fmean(values)
        half = Z_95 * stdev(values) / math.sqrt(len(values)) if len(values) > 1 else 0.0
        return cls(centre, centre - half, centre + half)


@dataclass
class GroupSignal:
    total: int = 0
    differing: int = 0
    failed: int = 0
    failed_differing: int = 0

    def add(self, rollouts: Sequence[Outcome]) -> None:
        differ = len({o.reward for o in rollouts}) > 1
        self.total += 1
        self.differing += differ
        if not any(o.correct for o in rollouts):
            self.failed += 1
            self.failed_differing += differ


@dataclass(frozen=True)
class ProfileAudit:
    """One profile's episodes, by behaviour, in the order of `questions`."""

    name: str
    config: RewardConfig
    questions: tuple[Question, ...]
    outcomes: Mapping[str, tuple[Outcome, ...]]
    seed: int

    @property
    def cheapest_correct(self) -> float:
        return min(o.reward for runs in self.outcomes.values() for o in runs if o.correct)

    def best_wrong(self, behaviour: str) -> float | None:
        rewards = [o.reward for o in self.outcomes[behaviour] if not o.correct]
        return max(rewards) if rewards else None

    @property
    def best_without_a_correct_answer(self) -> tuple[str, float]:
        best = {b: self.best_wrong(b) for b in WRONG_BEHAVIOURS}
        name = max((b for b in best if best[b] is not None), key=lambda b: best[b])
        return name, best[name]

    @property
    def correctness_dominates(self) -> bool:
        return self.best_without_a_correct_answer[1] < self.cheapest_correct

    def skill_rewards(self, skill: float) -> list[float]:
        """The noisy oracle's episode rewards at `skill`, one per question."""
        solved = round(skill * len(self.questions))
        ranks = list(range(len(self.questions)))
        random.Random(f"{self.seed}:skill").shuffle(ranks)
        oracle_runs, missed_runs = self.outcomes["oracle"], self.outcomes["near miss"]
        return [
            (oracle_runs if rank < solved else missed_runs)[index].reward
            for index, rank in enumerate(ranks)
        ]

    @property
    def skill_means(self) -> list[Mean]:
        return [Mean.of(self.skill_rewards(skill)) for skill in SKILL_LEVELS]

    @property
    def rises_with_skill(self) -> bool:
        means = [mean.value for mean in self.skill_means]
        return all(low < high for low, high in itertools.pairwise(means))

    @property
    def groups(self) -> GroupSignal:
        """GRPO groups, one per question, each of rollouts by a policy of one skill level drawn
        for the group: how many hold rewards that differ, overall and where every rollout
        failed."""
        signal = GroupSignal()
        for index, question in enumerate(self.questions):
            rng = random.Random(f"{self.seed}:group:{question.id}")
            skill = rng.choice(SKILL_LEVELS)
            rollouts = [self.outcomes[_behaviour_at(skill, rng)][index] for _ in range(GROUP_SIZE)]
            signal.add(rollouts)
        return signal

    @property
    def passed(self) -> bool:
        return self.correctness_dominates and self.rises_with_skill

    def report(self) -> str:
        n = len(self.questions)
        settings = ", ".join(
            f"{f.name} {getattr(self.config, f.name)}" for f in fields(RewardConfig)
        )
        lines = [textwrap.fill(f"profile {self.name}: {settings}", 100, subsequent_indent="  "), ""]
        lines.append(f"  {'strategy':<24}{'correct':>10}{'mean reward':>13}{'best wrong':>12}")
        for behaviour, runs in self.outcomes.items():
            correct = sum(o.correct for o in runs)
            best = self.best_wrong(behaviour)
            shown_best = "-" if best is None else _signed(best)
            average = _signed(fmean(o.reward for o in runs))
            lines.append(f"  {behaviour:<24}{f'{correct}/{n}':>10}{average:>13}{shown_best:>12}")
        name, best = self.best_without_a_correct_answer
        verdict = "holds" if self.correctness_dominates else "FAILS"
        lines += [
            "",
            f"  cheapest correct episode {_signed(self.cheapest_correct)}; best episode without "
            f"a correct answer {_signed(best)} ({name}): correctness dominates: {verdict}",
            "",
            f"  {'skill':<8}{'mean reward':>13}   95% interval",
        ]
        for skill, mean in zip(SKILL_LEVELS, self.skill_means, strict=True):
            interval = f"[{_signed(mean.low)}, {_signed(mean.high)}]"
            lines.append(f"  {skill:<8.1f}{_signed(mean.value):>13}   {interval}")
        rises = "yes" if self.rises_with_skill else "NO"
        groups = self.groups
        lines += [
            f"  rises strictly with skill: {rises}",
            "",
            f"  GRPO groups of {GROUP_SIZE} rollouts whose rewards differ (a learning signal): "
            f"{_share(groups.differing, groups.total)}",
            f"  ... of the groups where every rollout failed: "
            f"{_share(groups.failed_differing, groups.failed)}",
            f"  verdict: {'pass' if self.passed else 'FAIL'}",
        ]
        return "\n".join(lines)


def _behaviour_at(skill: float, rng: random.Random) -> str:
    """What one rollout of a policy of `skill` plays: a solve with that probability."""
    return "oracle" if rng.random() < skill else rng.choice(WRONG_BEHAVIOURS)


def _share(part: int, whole: int) -> str:
    return f"{part}/{whole} = {100 * part / whole:.1f}%" if whole else "0/0"


def _signed(value: float) -> str:
    return f"{value:+.3f}".replace("-0.000", "+0.000")


def audit(
    settings: Settings,
    profiles: Mapping[str, RewardConfig],
    seed: int = 0,
    limit: int | None = None,
    progress: Callable[[str], None] = lambda _line: None,
) -> list[ProfileAudit]:
    """Audit each profile on the settings' split (`limit`: that many questions, drawn with
    the seed), with the settings' data, budget and SQL limits."""
    catalog = load_catalog(settings)
    questions = catalog.questions(settings.split)
    if limit is not None and limit < len(questions):
        questions = tuple(random.Random(seed).sample(questions, limit))
    audits = []
    for name, config in profiles.items():
        manager = EpisodeManager(catalog, settings, rewards=config)
        try:
            outcomes = _play_all(manager, questions, name, progress)
        finally:
            manager.shutdown()
        audits.append(ProfileAudit(name, config, questions, outcomes, seed))
    return audits


def _play_all(
    manager: EpisodeManager,
    questions: Sequence[Question],
    profile: str,
    progress: Callable[[str], None],
) -> dict[str, tuple[Outcome, ...]]:
    outcomes: dict[str, list[Outcome]] = {behaviour: [] for behaviour in BEHAVIOURS}
    for done, question in enumerate(questions, 1):
        for behaviour, strategy in BEHAVIOURS.items():
            outcomes[behaviour].append(play(manager, question, strategy))
        if done % 100 == 0 or done == len(questions):
            progress(f"{profile}: {done}/{len(questions)} questions")
    return {behaviour: tuple(runs) for behaviour, runs in outcomes.items()}
