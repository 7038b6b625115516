"""The tool registry and the definitions it serves: what a tool is and which ones exist."""
