"""The assessor: the green agent, SQL-exploration assessments that other agents can be sent
to over A2A.

An assessment request names the assessed agent (A2A's participant, AgentBeats' purple agent) by
its A2A address and says how many episodes to play, with which seed, split and step budget. For
each planned episode the green agent assigns an episode in assessment mode
(`sqlenv_mcp.assessment`), sends the assessed agent the question and the address of that
episode's MCP tools, waits for it to finish, and reads the outcome from the engine, never from
the assessed agent. The result is the same per-episode records and summary `sqlenv eval` writes
for the same policy and seed. `purple` is a reference assessed agent.
"""
