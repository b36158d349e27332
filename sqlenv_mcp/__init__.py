"""The MCP door: describe/sample/query/answer as MCP tools over stdio and streamable HTTP."""
