"""The offline demo model: a script that calls real tools, the default with no API key.

``DemoChatModel`` is not an LLM. Its scenarios are data (:mod:`agents.demo.scenarios`: a
trigger on the question, a tool call, answer sentences filled from the result), played by
:mod:`agents.demo.script` and written in the format the prompt asks for by
:mod:`agents.demo.model`: native ``tool_calls`` (several per turn), or ReAct, structured
chat or XML text (one call per turn). What a visitor sees:

* the calls a question triggers, then an answer in its language saying each result, or
  the tool's own error ("weather in Atlantis": the weather tool's "Unknown town");
* "And in Chengdu?" repeats the previous question's town-bound calls for Chengdu;
* ``#malformed`` in a question breaks the first reply to it in the chosen format;
* ``tool_choice``, ``parallel_tool_calls=False`` and ``stop`` sequences honoured;
* the bundled agents' tools only (travel, and the almanac's MCP tools): for an agent
  with other tools or none, a reply saying it is a scripted model and how to configure
  a real one;
* for anything else, a reply listing the questions the bound tools can answer; it
  never raises.
"""

from __future__ import annotations

from agents.demo.model import DemoChatModel

__all__ = ["DemoChatModel"]
