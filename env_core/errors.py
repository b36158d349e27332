"""The engine's exceptions. Each door maps them to its own error form.

`str(error)` is always a complete sentence an agent or a person can act on.
"""

import heapq
import re
from collections.abc import Collection, Mapping

from env_core.render import within_budget


class SQLEnvError(Exception):
    """Base class of every error the engine raises on purpose."""


class DataError(SQLEnvError):
    """A data directory, question file or database cannot be used."""


class UnknownQuestionError(SQLEnvError):
    """A question id, database id or split that the catalog does not hold."""


class ToolError(SQLEnvError):
    """A tool call the agent can correct: the episode goes on and the step is spent."""


class UnknownTableError(ToolError):
    """describe/sample named a table the database does not have."""


class QueryRejectedError(ToolError):
    """SQL that is not a single read-only statement within the size and memory limits."""

    @classmethod
    def over_memory(cls, memory_mb: int) -> "QueryRejectedError":
        return cls(
            f"the query was stopped: it needed more than the {memory_mb} MiB of memory a "
            "query may use; simplify it, filter earlier or add a LIMIT"
        )

    @classmethod
    def worker_ended(cls, signal_name: str) -> "QueryRejectedError":
        return cls(
            f"the query was stopped: the process running it was ended by {signal_name} before "
            "it answered, which none of the query's limits does (the system may be short of "
            "memory); make it again"
        )


class QueryTimeoutError(ToolError):
    """SQL that ran past its deadline and was interrupted."""

    @classmethod
    def after(cls, timeout_s: float) -> "QueryTimeoutError":
        return cls(
            f"query stopped after the {timeout_s:g} s time limit; "
            "add a LIMIT, filter earlier or avoid cross joins"
        )


class QueryFailedError(ToolError):
    """SQL that SQLite could not compile or run (syntax error, unknown column, ...)."""


class CallCancelledError(ToolError):
    """The caller gave up on a call while it ran; the call was spent all the same."""

    @classmethod
    def spent(cls) -> "CallCancelledError":
        return cls("the call was cancelled before it returned; it used a step")


class InvalidArgumentError(ToolError):
    """A tool argument of the wrong type, range or size."""


class EpisodeError(SQLEnvError):
    """An episode that cannot take this call."""


class UnknownEpisodeError(EpisodeError):
    """No open episode has this id (never created, closed, or reaped when idle)."""


class EpisodeFinishedError(EpisodeError):
    """The episode has ended (answered or out of budget); start a new one."""


class EpisodeBusyError(EpisodeError):
    """Another call on the same episode is still running; the episode goes on."""


class ServerBusyError(EpisodeError):
    """No SQL worker was free for as long as a query may run, or none could start; the call
    was not taken."""

    @classmethod
    def after(cls, timeout_s: float) -> "ServerBusyError":
        return cls(
            f"the server is busy: no SQL worker was free within {timeout_s:g} s; the call "
            "was not taken and used no step; make it again"
        )

    @classmethod
    def worker_lost(cls) -> "ServerBusyError":
        return cls(
            "the server's SQL worker stopped before the call ran; the call was not taken and "
            "used no step; make it again"
        )

    @classmethod
    def without_workers(cls) -> "ServerBusyError":
        return cls(
            "the server cannot run queries right now: no SQL worker could be started; the "
            "call was not taken and used no step; make it again later"
        )


class UnknownToolError(EpisodeError):
    """A tool that does not exist; the episode goes on."""


class CapacityError(SQLEnvError):
    """The episode manager holds as many episodes as it may."""


class SessionClosedError(SQLEnvError):
    """The session that held the client's episodes has closed: a new one must be opened."""


def error_kind(error: SQLEnvError) -> str:
    """A stable snake_case name for an error, e.g. UnknownTableError -> "unknown_table"."""
    return _kind(type(error))


def _kind(error_class: type[SQLEnvError]) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", error_class.__name__.removesuffix("Error")).lower()


def error_kinds(base: type[SQLEnvError] = SQLEnvError) -> dict[str, type[SQLEnvError]]:
    """Every error class from `base` down, by kind."""
    found, pending = {}, [base]
    while pending:
        error_class = pending.pop()
        found[_kind(error_class)] = error_class
        pending.extend(error_class.__subclasses__())
    return found


def error_from(data: Mapping[str, str]) -> SQLEnvError:
    """The engine error whose structured form (`error_data`) a door received."""
    error_class = error_kinds().get(data.get("error", ""), SQLEnvError)
    return error_class(data.get("message", ""))


def error_data(error: SQLEnvError) -> dict[str, str]:
    """The structured form of an error every door sends: a stable kind and the sentence,
    within the budget of a text."""
    return {"error": error_kind(error), "message": within_budget(str(error))}


def ends_episode(error: SQLEnvError) -> bool:
    """Whether an error means the episode can take no more calls (a door reports done)."""
    return isinstance(error, UnknownEpisodeError | EpisodeFinishedError)


MAX_LISTED = 5


def listed(names: Collection[str]) -> str:
    """Names as an error message lists them: the first few in order, each `shown`, and how
    many more (a client may send any number of them)."""
    first = ", ".join(map(shown, heapq.nsmallest(MAX_LISTED, names)))
    more = len(names) - MAX_LISTED
    return first if more <= 0 else f"{first} and {more:,} more"


def shown(value: object, limit: int = 40) -> str:
    """A value as an error message echoes it: quoted, and cut short when long."""
    return shortened(repr(value), limit)


def encodable(text: str) -> str:
    """The text with any lone surrogate (which JSON can carry but UTF-8 cannot) written as an
    escape, such as \\ud800."""
    return text.encode("utf-8", "backslashreplace").decode()


def shortened(text: str, limit: int) -> str:
    """The text cut to `limit` characters, "..." marking a cut."""
    return text if len(text) <= limit else text[:limit] + "..."
