"""The shared tool-call loop: Hermes parsing, malformed calls counted and not fatal."""

import json

from env_core.episode import EpisodeStart, ToolResult
from env_core.hermes import ModelTurn, RawToolCall, parse_hermes
from evals.llm.chat_loop import ChatPolicy, usable_call
from evals.plan import EpisodeTask
from evals.policy import EpisodeContext, ToolCall


def test_hermes_blocks_become_tool_calls_and_the_rest_content():
    turn = parse_hermes(
        '<think>look first</think>Let me look.\n<tool_call>\n{"name": "describe", '
        '"arguments": {"table": "singer"}}\n</tool_call>\n<tool_call>{oops}</tool_call>'
    )
    assert turn.content == "Let me look."
    assert turn.tool_calls == [
        RawToolCall("call_0", "describe", {"table": "singer"}),
        RawToolCall("call_1", "", None),
    ]
    unfinished = parse_hermes('<tool_call>\n{"name": "query", "arguments": {"sql": "SELECT 1"}}')
    assert unfinished.tool_calls[0].arguments == {"sql": "SELECT 1"}


def test_the_first_usable_call_is_taken_and_answers_become_json_text():
    turn = ModelTurn(
        "",
        [
            RawToolCall("a", "drop_table", {}),
            RawToolCall("b", "query", "not json"),
            RawToolCall("c", "answer", '{"value": [["Paris", 3]]}'),
        ],
    )
    call, arguments = usable_call(turn)
    assert call.id == "c"
    assert json.loads(arguments["value"]) == [["Paris", 3]]
    assert usable_call(ModelTurn("I think it is 42.", [])) is None


class ScriptedModel:
    """Stands in for the model (not for the loop under test): replies with fixed turns."""

    def __init__(self, turns: list[ModelTurn]) -> None:
        self.turns = iter(turns)
        self.seen: list[list[dict]] = []

    def complete(self, messages, tools, seed):
        self.seen.append([dict(m) for m in messages])
        return next(self.turns)


def context_for(demo_catalog) -> EpisodeContext:
    question = demo_catalog.questions("dev")[0]
    start = EpisodeStart("e1", question.text, question.db_id, ("t",), 15, "Question: ...")
    return EpisodeContext(start, question, EpisodeTask(0, question.id).rng(0))


def test_malformed_turns_are_counted_and_reported_back_to_the_model(demo_catalog):
    model = ScriptedModel(
        [
            ModelTurn("no call here", []),
            ModelTurn(
                "",
                [RawToolCall("x", "describe", {"table": "t"}), RawToolCall("y", "sample", {})],
            ),
            ModelTurn("", [RawToolCall("z", "answer", {"value": 7})]),
        ]
    )
    context = context_for(demo_catalog)
    play = ChatPolicy("scripted", model).play(context)
    assert next(play) == ToolCall("describe", {"table": "t"})
    done = ToolResult("describe", True, "table t: 1 rows", {}, 0.0, False)
    assert play.send(done) == ToolCall("answer", {"value": "7"})
    assert context.notes == {"model_turns": 3, "malformed_calls": 1, "dropped_tool_calls": 1}
    second_prompt = model.seen[1]
    assert second_prompt[-1]["role"] == "user" and "valid tool call" in second_prompt[-1]["content"]
    third_prompt = model.seen[2]
    assert third_prompt[-2]["tool_calls"][0]["id"] == "x"  # only the call that was made
    assert third_prompt[-1] == {
        "role": "tool", "tool_call_id": "x", "name": "describe", "content": "table t: 1 rows"
    }  # fmt: skip


def test_the_policy_gives_up_after_three_malformed_turns_in_a_row(demo_catalog):
    context = context_for(demo_catalog)
    play = ChatPolicy("scripted", ScriptedModel([ModelTurn("hmm", [])] * 3)).play(context)
    assert next(play, None) is None
    assert context.notes == {"model_turns": 3, "malformed_calls": 3, "gave_up": 1}
