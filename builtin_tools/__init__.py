"""The hub's own tools, one self-registering module per tool (or small family).

Each module is the four pieces of a tool: a handler, a ``check_fn`` (is the
tool available now?), a JSON schema, and a ``registry.register(...)`` call at
module top level. ``mcp_hub.pipeline.discovery.discover_builtin_tools`` finds the modules
by scanning this folder (files starting with ``_`` are skipped) and imports
them; importing a module is what registers its tools. Nothing is imported here,
so importing the package registers nothing.

Modules and tools:

* ``hub_status`` — toolset ``hub``: ``hub_status``
* ``clarify`` — toolset ``clarify``: ``clarify``
* ``file_tools`` — toolset ``file``: ``read_file``, ``write_file``, ``search_files``
* ``terminal`` — toolset ``terminal``: ``terminal``
"""
