"""Task datasets and oracle transcripts, checked against the engine and TRL's parser."""

from __future__ import annotations

import json
import os

from trl.chat_template_utils import (
    add_response_schema,
    parse_response,
    qwen3_chat_template,
    qwen3_training_chat_template,
)

from doors.trl import SQLEnvTRL
from env_core.contract import opening_messages
from env_core.factory import open_manager
from training.datasets import choose_questions, task_dataset
from training.tiny import build_tokenizer, render_corpus
from training.tool_calls import is_well_formed
from training.transcripts import (
    CLOSING,
    oracle_transcript,
    sft_dataset,
    tool_schemas,
    transcript_chars,
)

SPLIT = "dev_without_wta_1"


def test_task_rows_reset_the_question_they_name(spider_manager, spider_catalog):
    questions = choose_questions(spider_catalog, SPLIT, limit=6, seed=3)
    assert questions == choose_questions(spider_catalog, SPLIT, limit=6, seed=3)
    dataset = task_dataset(questions)
    assert dataset.column_names == ["prompt", "question_id", "dataset", "db_id", "hardness"]
    environment = SQLEnvTRL(spider_manager)
    for row, question in zip(dataset, questions, strict=True):
        assert row["prompt"] == opening_messages("")  # TRL appends reset's text to the last
        opening = environment.reset(**row)  # the whole row, as GRPOTrainer passes it
        assert environment.episode.question == question
        assert opening.startswith(f"Question: {question.text}\nDatabase: {question.db_id}\n")


def test_rows_of_a_mixed_run_name_their_dataset_and_reset_its_question(spider_dir, cache_dir):
    dk = (spider_dir / ".." / "spider-dk").resolve()
    assert dk.is_dir(), f"Spider-DK data directory not found at {dk}; the tests need it there"
    data_dir = os.pathsep.join([f"{spider_dir}@{SPLIT}", f"{dk}@Spider-DK"])
    manager = open_manager(
        data_dir=data_dir, databases_dir=str(spider_dir / "database"), cache_dir=str(cache_dir)
    )
    try:
        questions = choose_questions(manager.catalog, "dev", limit=40, seed=1)
        rows = task_dataset(questions)
        assert {row["dataset"] for row in rows} == {"spider", "spider-dk"}
        environment = SQLEnvTRL(manager)
        for row in rows.select(range(8)):
            assert row["question_id"].startswith(f"{row['dataset']}/")
            environment.reset(**row)
            assert environment.episode.question.id == row["question_id"]
    finally:
        manager.shutdown()


def test_oracle_transcripts_replay_the_engine_and_answer_correctly(spider_manager, spider_catalog):
    environment = SQLEnvTRL(spider_manager)
    questions = spider_catalog.questions(SPLIT)[:20]
    lengths = []
    for question in questions:
        messages = oracle_transcript(environment, question)
        lengths.append(transcript_chars(messages))
        episode = environment.episode
        assert episode.correct is True
        tool_messages = [m["content"] for m in messages if m["role"] == "tool"]
        assert tool_messages == [step.result.text for step in episode.history]
        assert messages[-1] == {"role": "assistant", "content": CLOSING}
    median = sorted(lengths)[len(lengths) // 2]
    dataset = sft_dataset(environment, questions, max_chars=median)
    assert len(dataset) == sum(length <= median for length in lengths)
    names = [schema["function"]["name"] for schema in json.loads(dataset[0]["tools"])]
    assert names == ["answer", "describe", "query", "sample"]


def test_trls_parser_reads_back_every_rendered_oracle_call(spider_manager, spider_catalog):
    environment = SQLEnvTRL(spider_manager)
    schemas = tool_schemas(environment)
    conversations = [oracle_transcript(environment, q) for q in spider_catalog.questions(SPLIT)[:8]]
    tokenizer = add_response_schema(build_tokenizer(render_corpus(conversations, schemas)))
    assert tokenizer.chat_template == qwen3_chat_template  # so TRL recognises it
    for messages in conversations:
        for turn, message in enumerate(messages):
            if message["role"] != "assistant" or not message.get("tool_calls"):
                continue
            prefix, full = (
                tokenizer.apply_chat_template(
                    messages[:end],
                    tools=schemas,
                    chat_template=qwen3_training_chat_template,
                    add_generation_prompt=generation,
                    return_dict=False,
                )
                for end, generation in ((turn, True), (turn + 1, False))
            )
            assert full[: len(prefix)] == prefix
            parsed = parse_response(tokenizer, full[len(prefix) : -1], prefix=prefix, tools=schemas)
            assert is_well_formed(parsed, schemas)
            call = message["tool_calls"][0]["function"]
            assert parsed["tool_calls"][0]["function"]["name"] == call["name"]
            assert parsed["tool_calls"][0]["function"]["arguments"] == json.loads(call["arguments"])


def test_building_the_tiny_tokenizer_writes_nothing_to_stdout(capfd):
    build_tokenizer(["SELECT name FROM singer", "Which genre has the most books?"] * 20)
    assert capfd.readouterr().out == ""
