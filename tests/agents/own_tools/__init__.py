"""Tools an agent's owner might write, for the tests of agents.tool_loading (and the
agents the tests define): every kind a dotted path may name, and the faults to refuse."""
