"""Building the MCP server for episode mode or explorer mode, and its HTTP application."""

import hmac
import json
import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import anyio
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from env_core import contract
from env_core.manager import EpisodeManager
from env_core.settings import Settings
from env_core.tools import ToolSpec
from serving.garbage_collection import tune_for_serving
from serving.health import HEALTH_PATH, health_status
from sqlenv_mcp import assessment as assessments
from sqlenv_mcp import episodes, explorer
from sqlenv_mcp.agent_tools import AgentToolServer
from sqlenv_mcp.guard import SessionGuard
from sqlenv_mcp.sdk import HttpOptions

LOCAL_HOSTS = ("127.0.0.1:*", "localhost:*", "[::1]:*")


def with_default_ports(hosts: list[str]) -> list[str]:
    """The Host patterns, and for each of any port ("name:*") the name alone too: a client
    leaves the port out of the Host header when it is the scheme's default (80, or 443 behind
    a TLS proxy), and the SDK's pattern matches only a name followed by a port."""
    return [*hosts, *(host.removesuffix(":*") for host in hosts if host.endswith(":*"))]


# Sessions of all clients together; one client's are capped by the settings.
MAX_SESSIONS = 10_000


@dataclass(frozen=True)
class HttpSettings:
    """The HTTP side of the MCP server: the shared settings, and the Host names to accept."""

    settings: Settings = field(default_factory=Settings)
    allowed_hosts: tuple[str, ...] = ()
    stateless: bool = False  # each request served on its own, with no MCP session


# What keeps a server from serving (its SQL workers cannot start, say), or None.
Unavailable = Callable[[], str | None]
# Set by `BearerAuth` on a health check without the token: it is told the status alone.
STATUS_ONLY = "sqlenv.status_only"


# What a browser (or curl) pointed at the server's address is told.
FRONT_TEXT = (
    "sqlenv: an SQL-exploration environment served over MCP. Point an MCP client at /mcp "
    "(streamable HTTP); GET /health reports the server's health.\n"
)


def _new_server(
    instructions: str,
    http: HttpSettings,
    health: Callable[[], dict],
    unavailable: Unavailable,
) -> AgentToolServer:
    # DNS-rebinding protection stays on whatever the bind address: the SDK would switch it off
    # for 0.0.0.0, so the allowlist is passed explicitly (extended by --allowed-host).
    hosts = with_default_ports([*LOCAL_HOSTS, *http.allowed_hosts])
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=hosts,
        allowed_origins=[
            *(f"http://{host}" for host in hosts),
            *(f"https://{host}" for host in hosts),
        ],
    )
    options = HttpOptions(
        host=http.settings.host,
        port=http.settings.port,
        stateless=http.stateless,
        # A session holding an episode lives as long as the episode may stay idle.
        session_idle_timeout=http.settings.idle_ttl_s,
        max_sessions=MAX_SESSIONS,
        transport_security=security,
    )
    server = AgentToolServer("sqlenv", instructions=instructions, http=options)

    host_check = TransportSecurityMiddleware(security)

    # Custom routes bypass the SDK's checks: the Host check is made here; the token, if any,
    # by `BearerAuth`, which lets a request without it see the status alone.
    @server.custom_route("/", methods=["GET"])
    async def front(request: Request) -> Response:
        refused = await host_check.validate_request(request)
        return refused or PlainTextResponse(FRONT_TEXT)

    @server.custom_route(HEALTH_PATH, methods=["GET"])
    async def health_check(request: Request) -> JSONResponse:
        refused = await host_check.validate_request(request)
        if refused:
            return refused
        reason = unavailable()
        status, code = health_status(reason)
        body = {"status": status}
        if not request.scope.get(STATUS_ONLY):
            body |= health() if reason is None else {**health(), "detail": reason}
        return JSONResponse(body, status_code=code)

    return server


def build_episode_server(
    manager: EpisodeManager,
    http: HttpSettings | None = None,
    output_schemas: bool = True,
    sessions: episodes.Sessions | None = None,
) -> AgentToolServer:
    sessions = sessions or episodes.Sessions(manager)
    server = _new_server(
        episodes.INSTRUCTIONS,
        http or HttpSettings(),
        lambda: {"episodes": asdict(manager.stats())},
        manager.sandbox.unavailable,
    )
    episodes.register_episode_tools(server, sessions, output_schemas)

    @server.resource(
        "sqlenv://databases",
        name="databases",
        description="The databases questions are asked about, with their question counts, and "
        "the served catalog's fingerprint.",
        mime_type="application/json",
    )
    def databases() -> str:
        counts = Counter(q.db_id for q in manager.catalog.questions(manager.settings.split))
        return json.dumps(
            {
                "split": manager.settings.split,
                "databases": dict(sorted(counts.items())),
                "catalog": manager.served(),
            }
        )

    @server.prompt(description="Start an episode and solve it with the tools.")
    def solve_question(question_id: str | None = None) -> str:
        which = f"with question_id {question_id}" if question_id else "for a random question"
        return f"Call start_episode {which}.\n\n{contract.INSTRUCTIONS}"

    return server


def build_assessment_server(
    seats: assessments.Seats,
    tools: tuple[ToolSpec, ...],
    seat_of: assessments.SeatOf,
    http: HttpSettings | None = None,
    output_schemas: bool = True,
    unavailable: Unavailable = lambda: None,
) -> AgentToolServer:
    """Assessment mode: `tools` (their descriptions under the served limits) on each seat's
    episode, found by `seat_of`; `unavailable`: its sessions' (`Sandbox.unavailable`)."""
    server = _new_server(
        assessments.INSTRUCTIONS,
        http or HttpSettings(),
        lambda: {"seats": len(seats)},
        unavailable,
    )
    assessments.register_assessment_tools(server, tools, seat_of, output_schemas)
    return server


def build_explorer_server(
    databases: explorer.UserDatabases,
    http: HttpSettings | None = None,
    output_schemas: bool = True,
) -> AgentToolServer:
    server = _new_server(
        explorer.INSTRUCTIONS,
        http or HttpSettings(),
        lambda: {"databases": list(databases.files)},
        databases.sandbox.unavailable,
    )
    explorer.register_explorer_tools(server, databases, output_schemas)

    @server.resource(
        "sqlenv://databases",
        name="databases",
        description="The databases served, with their tables and row counts.",
        mime_type="text/plain",
    )
    def listing() -> str:
        return databases.listing()

    @server.prompt(description="Explore a database and summarise what it holds.")
    def explore_database(database: str | None = None) -> str:
        which = f"the database {database}" if database else "the databases served"
        return (
            f"Explore {which}: read the sqlenv://databases resource, describe the tables, "
            "sample a few rows, then summarise what the data is about and how tables relate."
        )

    return server


class BearerAuth:
    """Require `Authorization: Bearer <token>` on every path but the `public` ones. /health
    without it answers the status alone (for load balancers and container health checks),
    nothing more."""

    def __init__(self, app: ASGIApp, token: str, public: tuple[str, ...] = ()) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()
        self.public = public

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] not in self.public:
            given = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                if scope["path"] == HEALTH_PATH:
                    await self.app({**scope, STATUS_ONLY: True}, receive, send)
                    return
                response = PlainTextResponse(
                    "missing or wrong bearer token",
                    status_code=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


class _ClosedStreams(logging.Filter):
    """The SDK logs a stream closed under its writer as an error with a traceback: every
    session ended while its client held the event stream open (as the SDK client does) would
    fill the log. A closed stream is how a connection ends."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not isinstance(error, anyio.ClosedResourceError)


CLOSED_STREAMS = _ClosedStreams()


def http_app(
    server: AgentToolServer,
    http: HttpSettings,
    auth_token: str | None,
    in_use: Callable[[str], bool] = lambda _session_id: True,
    seats: assessments.Seats | None = None,
    server_id: str | None = None,
) -> ASGIApp:
    """The streamable-HTTP application, its sessions guarded (see `sqlenv_mcp.guard`):
    `in_use(session_id)` tells a session that must not be ended early. In assessment
    mode (`seats`), sessions are opened at a seat's address (see `SeatRouter`). The
    process serves from here on: its garbage collector and the SDK's log are set for that.
    `server_id`: the id the server's episode handles name, sent with every response."""
    tune_for_serving()
    logging.getLogger("mcp.server.streamable_http").addFilter(CLOSED_STREAMS)
    app = SessionGuard(
        server.streamable_http_app(),
        in_use,
        per_client=http.settings.max_sessions_per_client,
        idle_unused_s=http.settings.idle_session_timeout_s,
        idle_s=http.settings.idle_ttl_s,
    )
    if seats is not None:
        app = assessments.SeatRouter(app, seats)
    if server_id is not None:
        app = naming_server(app, server_id)
    if auth_token:
        return BearerAuth(app, auth_token)
    # The seats are the operator's to know: with no token to tell the operator by, a health
    # check in assessment mode is told the status alone.
    return app if seats is None else status_only(app)


# Names the server on every response: a balancer learns from it which replica issued a handle.
SERVER_HEADER = b"sqlenv-server"


def naming_server(app: ASGIApp, server_id: str) -> ASGIApp:
    named = (SERVER_HEADER, server_id.encode())

    async def answer_named(scope: Scope, receive: Receive, send: Send) -> None:
        async def send_named(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), named]}
            await send(message)

        await app(scope, receive, send_named)

    return answer_named


def status_only(app: ASGIApp) -> ASGIApp:
    async def told_status(scope: Scope, receive: Receive, send: Send) -> None:
        await app({**scope, STATUS_ONLY: True}, receive, send)

    return told_status
