"""The policy's environment: tool definitions, tool-call parsing and the episode loop."""
