"""Episode handles: the `episode_id` an MCP server gives at start_episode, which any request
may present to act on the episode, with a session or without one.

A handle is `SERVER.NONCE.CHECK`: the issuing server's id (8 hex digits, public, made when the
server process starts; a balancer routes a request to the server it names), 128 random bits,
and 64 bits of HMAC-SHA256 over both under a key the server process makes and never shows. A
server tells apart what it did not issue (another server's id, a check that does not match,
text of another shape) from an episode of its own that has ended, without remembering either.
"""

import hmac
import re
import secrets

from env_core.errors import UnknownEpisodeError, shown

SHAPE = re.compile(r"[0-9a-f]{8}\.[0-9a-f]{32}\.[0-9a-f]{16}")


class Handles:
    """The handles one server issues and recognises."""

    def __init__(self) -> None:
        self.server = secrets.token_hex(4)
        self._key = secrets.token_bytes(32)

    def issue(self) -> str:
        body = f"{self.server}.{secrets.token_hex(16)}"
        return f"{body}.{self._check(body)}"

    def _check(self, body: str) -> str:
        return hmac.digest(self._key, body.encode(), "sha256")[:8].hex()

    def verify(self, handle: str) -> None:
        """Raise `UnknownEpisodeError` saying why, unless this server issued `handle`."""
        if not SHAPE.fullmatch(handle):
            raise UnknownEpisodeError(
                f"no open episode {shown(handle)}: that is no episode id a server gives "
                "(cut short or altered?); pass the episode_id start_episode gave"
            )
        server, body, check = handle[:8], handle[:-17], handle[-16:]
        if server != self.server:
            raise UnknownEpisodeError(
                f"no open episode '{handle}': it was started on another server ({server}; this "
                f"is {self.server}), which alone holds it; if that server has stopped, the "
                "episode is lost: start a new episode"
            )
        if not hmac.compare_digest(check, self._check(body)):
            raise UnknownEpisodeError(
                f"no open episode '{handle}': this server did not issue that episode id (it "
                "names this server but its check does not match: altered or forged)"
            )
