"""The agent runtime: a tool-using loop that yields typed events.

Nothing in this package imports Django; it takes a LangChain chat model, tools and
messages and yields the dataclasses in :mod:`agents.events`.
"""
