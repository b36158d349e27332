"""The serving kit every door shares: the ASGI server set-up, the HTTP protocol and its
limits, bounded reads of peers, and the launcher of local servers. The engine imports none of it."""
