"""The servers listen on `listening_socket`: the connections they accept send each write at
once, without waiting for the peer's acknowledgement of the previous one (Nagle's algorithm)."""

import asyncio
import socket

from env_core.asgi import listening_socket


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
