"""A server that is not what our clients take it for, on a free 127.0.0.1 port, in a thread of
the test's process: it answers HTTP GETs and WebSocket messages the way a test tells it to
(an endless body, text that is no JSON, a frame cut off midway), for tests of what our clients
read from a server they call.

    with HostileServer(http={"/catalog": ENDLESS}) as server:
        check_something(server.url)

`http` maps a path to a body (bytes), ENDLESS or SILENT (headers, then nothing); an unlisted
path is a 404. On `/ws`, the first message is answered with `ws_reset` and every later one with
`ws_step`: a frame's text, or ENDLESS (a text frame announced as 1 GiB, streamed until the client
leaves), CUT (a frame announced as 100 bytes, of which 10 are sent before the connection is
closed) or SILENT (no answer).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import struct
import threading
from typing import Any

ENDLESS = "endless"
CUT = "cut"
SILENT = "silent"
CHUNK = b"x" * 65536
WEBSOCKET_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def reset_frame() -> str:
    """The frame our OpenEnv server answers a reset with, for an episode `e1`."""
    observation = {
        "text": "Question: how many?",
        "question": "how many?",
        "db_id": "db",
        "tables": ["t"],
        "budget": 5,
        "episode_id": "e1",
    }
    data = {"observation": observation, "reward": None, "done": False}
    return json.dumps({"type": "observation", "data": data})


def catalog(profile: str = "shaped") -> bytes:
    return json.dumps({"split": "dev", "reward_profile": profile}).encode()


class HostileServer:
    def __init__(
        self,
        http: dict[str, bytes | str] | None = None,
        ws_reset: str = reset_frame(),
        ws_step: str = "",
    ) -> None:
        self.http = {"/health": b"{}", "/catalog": catalog(), **(http or {})}
        self.ws_reset, self.ws_step = ws_reset, ws_step
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def __enter__(self) -> HostileServer:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0), self._loop
        ).result()
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"
        return self

    def __exit__(self, *_exc: object) -> None:
        async def stop() -> None:
            self._server.close()
            for task in asyncio.all_tasks() - {asyncio.current_task()}:
                task.cancel()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            request = await reader.readuntil(b"\r\n\r\n")
            path = request.split(b" ")[1].decode()
            headers = _headers(request)
            if path == "/ws" and "sec-websocket-key" in headers:
                await self._websocket(reader, writer, headers["sec-websocket-key"])
            else:
                await self._answer(writer, self.http.get(path))
        writer.close()

    async def _answer(self, writer: asyncio.StreamWriter, body: bytes | str | None) -> None:
        if body is None:
            writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
        elif body == ENDLESS:
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n")
            while True:  # no length: the body ends when the connection does, never
                writer.write(CHUNK)
                await writer.drain()
        elif body == SILENT:
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\n")
            await writer.drain()
            await asyncio.Event().wait()
        else:
            assert isinstance(body, bytes)
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))
        await writer.drain()

    async def _websocket(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, key: str
    ) -> None:
        accept = base64.b64encode(hashlib.sha1((key + WEBSOCKET_GUID).encode()).digest())
        writer.write(
            b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\n"
            b"sec-websocket-accept: " + accept + b"\r\n\r\n"
        )
        answers = 0
        while await _read_message(reader):
            answer = self.ws_reset if answers == 0 else self.ws_step
            answers += 1
            if answer == SILENT:
                continue
            if answer == ENDLESS:
                writer.write(b"\x81\x7f" + struct.pack(">Q", 1 << 30))
                while True:
                    writer.write(CHUNK)
                    await writer.drain()
            if answer == CUT:
                writer.write(b"\x81\x64" + b"{" * 10)
                await writer.drain()
                return
            payload = answer.encode()
            writer.write(_frame_header(len(payload)) + payload)
            await writer.drain()


def _headers(request: bytes) -> dict[str, Any]:
    lines = request.decode("latin-1").split("\r\n")[1:]
    pairs = (line.split(":", 1) for line in lines if ":" in line)
    return {name.strip().lower(): value.strip() for name, value in pairs}


async def _read_message(reader: asyncio.StreamReader) -> bool:
    """Read a client's next message (a masked, unfragmented frame), skipping pings and pongs;
    False once it closes."""
    while True:
        first, second = await reader.readexactly(2)
        length = second & 0x7F
        if length == 126:
            (length,) = struct.unpack(">H", await reader.readexactly(2))
        elif length == 127:
            (length,) = struct.unpack(">Q", await reader.readexactly(8))
        await reader.readexactly(4 + length)  # the mask and payload: what it says is not read
        opcode = first & 0x0F
        if opcode == 0x8:
            return False
        if opcode in (0x1, 0x2):
            return True


def _frame_header(length: int) -> bytes:
    if length < 126:
        return bytes([0x81, length])
    if length < 1 << 16:
        return b"\x81\x7e" + struct.pack(">H", length)
    return b"\x81\x7f" + struct.pack(">Q", length)
