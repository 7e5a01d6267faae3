"""lunaflow: durable workflows written in Lua.

The engine lives here. Start at ``docs/architecture.md`` for the map of modules.
"""

__version__ = "0.1.0"
