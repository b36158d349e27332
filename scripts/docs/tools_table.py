"""Print the tools as the engine's tool table defines them, as a Markdown table: in the order
an agent is told of them, each with the keys of the structured `data` a call of it on the
embedded demo returns (`[]` marks a list). The docs show it (`doc_examples.tools_table`)."""

from __future__ import annotations

from env_core.executor import quote_identifier
from env_core.factory import open_manager
from env_core.tools import ToolSpec, tool_table


def row(spec: ToolSpec, data: dict) -> str:
    properties = spec.parameters["properties"]
    call = ", ".join(
        name + (f"={s['default']}" if "default" in s else "") for name, s in properties.items()
    )
    ranges = [
        f" `{name}`: {s['minimum']} to {s['maximum']}."
        for name, s in properties.items()
        if "maximum" in s
    ]
    keys = ", ".join(f"{key}[]" if isinstance(value, list) else key for key, value in data.items())
    return f"| `{spec.name}({call})` | {spec.description}{''.join(ranges)} | `{keys}` |"


def main() -> None:
    manager = open_manager()
    try:
        episode = manager.create(seed=0)
        table = episode.start.tables[0]
        examples = {"table": table, "sql": f"SELECT * FROM {quote_identifier(table)}"}
        print("| tool | does | structured `data` |\n|---|---|---|")
        for spec in tool_table():
            arguments = {name: examples.get(name, "0") for name in spec.parameters["required"]}
            print(row(spec, episode.call(spec.name, arguments).data))
    finally:
        manager.shutdown()


if __name__ == "__main__":
    main()
