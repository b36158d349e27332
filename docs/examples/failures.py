"""Where a policy fails: read a run folder's episodes.jsonl (written by `sqlenv eval`) and print
how its episodes ended by hardness, the answers that were right, the calls that failed, the
policy's own counters (an LLM policy's malformed turns) and the transcript of one episode.

    python docs/examples/failures.py runs/random --transcript dev_without_wta_1:258
"""

import argparse
import json
import re
from collections import Counter
from pathlib import Path

HARDNESS = ("easy", "medium", "hard", "extra")
# Questions whose answer is one count: the only kind a policy that cannot read the question
# gets right by luck.
COUNTING = re.compile(r"^Question: (how many|count|what is the (total )?number)", re.IGNORECASE)


def ending(episode: dict) -> str:
    if episode["correct"]:
        return "correct"
    return "wrong answer" if episode["answered"] else "no answer"


def by_hardness(episodes: list[dict]) -> list[str]:
    endings = ("correct", "wrong answer", "no answer")
    lines = [f"{'hardness':<9}{'episodes':>9}" + "".join(f"{name:>14}" for name in endings)]
    for hardness in (*HARDNESS, "all"):
        chosen = [e for e in episodes if hardness in ("all", e["hardness"])]
        counts = Counter(ending(e) for e in chosen)
        lines.append(
            f"{hardness:<9}{len(chosen):>9}" + "".join(f"{counts[name]:>14}" for name in endings)
        )
    return lines


def right_answers(episodes: list[dict]) -> list[str]:
    counting = [e for e in episodes if COUNTING.match(e["opening"])]
    right = [e for e in episodes if e["correct"]]
    counts = [e for e in right if COUNTING.match(e["opening"])]
    lines = [
        f"correct: {len(right)}, of which {len(counts)} ask for a count "
        f"({len(counting)} of the {len(episodes)} questions do)"
    ]
    for e in right:
        question = e["opening"].splitlines()[0].removeprefix("Question: ")
        answer = e["steps"][-1]["arguments"]["value"]
        lines.append(f"  {e['question_id']:<22} {e['hardness']:<6} {question}  answer {answer}")
    return lines


def failed_calls(episodes: list[dict]) -> list[str]:
    steps = [step for e in episodes for step in e["steps"]]
    failed = Counter((s["tool"], s["error"] or "error") for s in steps if not s["ok"])
    lines = [f"calls: {len(steps)}, failed: {sum(failed.values())}"]
    lines += [f"  {tool:<9} {kind:<20} {count:>5}" for (tool, kind), count in failed.most_common()]
    return lines


def policy_counters(episodes: list[dict]) -> list[str]:
    totals: Counter = Counter()
    for e in episodes:
        totals.update(e["notes"])
    if not totals:
        return []
    return ["policy counters: " + ", ".join(f"{name} {n}" for name, n in sorted(totals.items()))]


def transcript(episode: dict) -> list[str]:
    lines = [f"episode {episode['question_id']} ({episode['hardness']}), {ending(episode)}"]
    lines.append(episode["opening"])
    for step in episode["steps"]:
        lines.append(
            f"> {step['tool']} {json.dumps(step['arguments'])}  reward {step['reward']:+.3f}"
        )
        lines.append(step["observation"])
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a run folder of sqlenv eval")
    parser.add_argument("--transcript", metavar="QUESTION_ID", help="print this episode")
    arguments = parser.parse_args()
    lines = (arguments.run / "episodes.jsonl").read_text().splitlines()
    episodes = sorted((json.loads(line) for line in lines), key=lambda e: e["index"])
    sections = [
        by_hardness(episodes),
        right_answers(episodes),
        failed_calls(episodes),
        policy_counters(episodes),
    ]
    if arguments.transcript:
        chosen = [e for e in episodes if e["question_id"] == arguments.transcript]
        if not chosen:
            parser.error(f"no episode of {arguments.transcript} in {arguments.run}")
        sections.append(transcript(chosen[0]))
    print("\n\n".join("\n".join(section) for section in sections if section))


if __name__ == "__main__":
    main()
