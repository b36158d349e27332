"""A client's JSON, read within bounds the doors' frameworks do not set.

OpenEnv and the MCP SDK parse a message whole and keep the parsed value until the connection's
next message: a 1 MiB frame of `{}` items is 340,000 dicts, ~25 MiB held for as long as its
socket stays idle. Python's parser also fails in ways they do not catch, with an HTTP 500 and a
traceback in the log, or by ending the session: nesting deep enough to exhaust its stack, a
number of more than `MAX_DIGITS` digits, bytes that are not UTF-8.

`read` parses what a door's guard must check first; `plain` tells, without parsing, a text
that cannot break a bound (nearly every message), which the guard passes on as it is.
"""

from __future__ import annotations

import json
import sys
from typing import Any

MAX_NESTING = 32
# Array items and object members in one message: a call's arguments are a few, an answer a few
# thousand cells at most.
MAX_VALUES = 10_000
MAX_DIGITS = sys.get_int_max_str_digits()

TOO_DEEP = f"a message may nest arrays and objects at most {MAX_NESTING} deep"
TOO_MANY = f"a message may hold at most {MAX_VALUES:,} values (array items and object members)"
NUMBER_TOO_LONG = f"a number may have at most {MAX_DIGITS} digits"
NOT_UTF8 = "a message must be UTF-8 text"


class Unreadable(ValueError):
    """JSON that breaks a bound; `str()` says which."""


def plain(text: str) -> bool:
    """Whether `text` is too short to hold a number over `MAX_DIGITS` digits or more than
    `MAX_VALUES` values, and opens too few arrays and objects to nest too deep."""
    return len(text) <= MAX_DIGITS and text.count("[") + text.count("{") <= MAX_NESTING


def read(text: str | bytes) -> Any:
    """The value `text` holds; `Unreadable` if it breaks a bound, ValueError (as `json.loads`
    raises it) if it is not JSON."""
    if isinstance(text, bytes):
        try:
            text = text.decode()
        except UnicodeDecodeError:
            raise Unreadable(NOT_UTF8) from None
    try:
        value = json.loads(text)
    except RecursionError:
        raise Unreadable(TOO_DEEP) from None
    except ValueError as error:
        if "integer string conversion" in str(error):  # Python's own limit, not JSON's
            raise Unreadable(NUMBER_TOO_LONG) from None
        raise
    if not plain(text):
        _check_shape(value)
    return value


def _check_shape(value: Any) -> None:
    level, depth, count = [value], 0, 0
    while level:
        containers = [item for item in level if isinstance(item, list | dict)]
        if containers and depth == MAX_NESTING:
            raise Unreadable(TOO_DEEP)
        level = [
            child
            for container in containers
            for child in (container.values() if isinstance(container, dict) else container)
        ]
        count += len(level)
        if count > MAX_VALUES:
            raise Unreadable(TOO_MANY)
        depth += 1
