"""The servers listen on `listening_socket`: the connections they accept send each write at
once, without waiting for the peer's acknowledgement of the previous one (Nagle's algorithm),
and a socket their parent bound for them is taken rather than bound again."""

import asyncio
import os
import socket

from serving.asgi import INHERITED_LISTENER_VARIABLE, listening_socket


def test_accepted_connections_send_small_writes_at_once():
    async def nodelay_of_an_accepted_connection() -> int:
        loop = asyncio.get_running_loop()
        listener = listening_socket("127.0.0.1", 0)
        accepted: asyncio.Future[int] = loop.create_future()

        class Accepting(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                connection = transport.get_extra_info("socket")
                accepted.set_result(connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
                transport.close()

        server = await loop.create_server(Accepting, sock=listener)
        try:
            _, writer = await asyncio.open_connection(*listener.getsockname())
            writer.close()
            return await asyncio.wait_for(accepted, 10)
        finally:
            server.close()
            await server.wait_closed()

    assert asyncio.run(nodelay_of_an_accepted_connection()) != 0


def test_a_socket_the_parent_bound_is_taken_once_and_only_for_its_own_address(monkeypatch):
    with socket.socket() as handed, socket.socket() as elsewhere:
        handed.bind(("127.0.0.1", 0))
        elsewhere.bind(("127.0.0.1", 0))
        port = handed.getsockname()[1]
        monkeypatch.setenv(INHERITED_LISTENER_VARIABLE, str(handed.fileno()))
        taken = listening_socket("127.0.0.1", port)
        assert taken.fileno() == handed.fileno()
        assert taken.proto == socket.IPPROTO_TCP  # so its connections send at once too
        taken.detach()  # `handed` closes it
        assert INHERITED_LISTENER_VARIABLE not in os.environ  # the processes it starts
        # A socket bound to another address is left open, and the server binds its own.
        monkeypatch.setenv(INHERITED_LISTENER_VARIABLE, str(elsewhere.fileno()))
        with listening_socket("127.0.0.1", 0) as own:
            assert own.fileno() != elsewhere.fileno()
        assert elsewhere.getsockname()[1] != 0  # still open
