"""Write the scripted demo model's text replies: the final answer, the plan, fallbacks.

The final answer lists each ToolMessage under its tool's name and arguments: an error
(``status="error"`` or an ``"error"`` key in the JSON) is said plainly, anything else is
summarised from its JSON shape by :mod:`agents.models.demo_summary`. Replies are in Chinese
when the user's question contains CJK characters, else English.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage

from agents.models.demo_summary import TEXT, scalar, summarise
from agents.models.demo_text import clip, content_text

_TEXT = {
    "en": {
        "intro": "Here is what the tools returned:",
        "failed": "failed",
        "all_failed": "None of the tools worked this time, so I can't answer from data. "
        "Please try again or rephrase.",
        "footer": "_Scripted demo answer built from the tool results (no LLM involved)._",
    },
    "zh": {
        "intro": "以下是工具返回的结果：",
        "failed": "调用失败",
        "all_failed": "这次所有工具都失败了，无法根据数据回答，请稍后重试或换个说法。",
        "footer": "_（演示模型：根据工具结果按脚本生成，并非大模型。）_",
    },
}


def _parse(content: str) -> Any:
    try:
        return json.loads(content)
    except (ValueError, TypeError):
        return content


def _args_hint(args: Any) -> str:
    if not isinstance(args, dict):
        return ""
    values = [f"{k}={clip(str(v), 40)}" for k, v in args.items() if scalar(v)][:2]
    return f" ({', '.join(values)})" if values else ""


def answer_from_results(
    results: Sequence[ToolMessage], request: AIMessage | None, lang: str
) -> str:
    """Return a Markdown answer that summarises each ToolMessage (errors said plainly)."""
    text = _TEXT[lang]
    calls = {c.get("id"): c for c in (request.tool_calls if request else [])}
    lines = [text["intro"], ""]
    failures = 0
    for message in results:
        call = calls.get(message.tool_call_id, {})
        name = message.name or call.get("name") or "tool"
        label = f"**{name}**{_args_hint(call.get('args'))}"
        payload = _parse(content_text(message.content))
        error = payload.get("error") if isinstance(payload, dict) else None
        if message.status == "error" or error:
            failures += 1
            reason = error if error else payload
            lines.append(f"- {label} {text['failed']}: {clip(str(reason), 200)}")
            continue
        known = frozenset(str(v) for v in (call.get("args") or {}).values())
        body = [line for line in summarise(payload, lang, known) if line] or [TEXT[lang]["none"]]
        if len(body) == 1:
            lines.append(f"- {label}: {body[0]}")
        else:
            lines.append(f"- {label}:")
            lines.extend(f"  - {line}" for line in body)
    if results and failures == len(results):
        lines += ["", text["all_failed"]]
    return "\n".join([*lines, "", text["footer"]])


def capabilities_reply(question: str, tools: Sequence[tuple[str, str]], lang: str) -> str:
    """Return the reply for a message no tool matched: what the demo can do."""
    said = clip(question, 80)
    if not tools:
        if lang == "zh":
            return (
                f"你好！我是离线演示模型（脚本，不是大模型）。这次没有可用的工具，"
                f"所以只能回复文字。你说的是：“{said}”"
            )
        return (
            "Hello! I'm the offline demo model (a script, not an LLM). No tools are available "
            f"in this run, so I can only reply in text. You said: “{said}”"
        )
    listing = "\n".join(f"- `{name}`: {clip(desc.split('.')[0], 90)}" for name, desc in tools)
    if lang == "zh":
        return (
            "我是离线演示模型（脚本，不是大模型），没能把你的消息对应到某个工具。"
            f"我可以调用这些工具：\n\n{listing}\n\n请用工具名称或说明里的词提问"
            "（需要城市的工具请写上城市名）。"
        )
    return (
        "I'm the offline demo model (a script, not an LLM) and couldn't match your message "
        f"to a tool. I can call these tools:\n\n{listing}\n\nAsk using words from a tool's "
        "name or description (and name a city where a tool needs one)."
    )


def missing_reply(missing: dict[str, list[str]], lang: str) -> str:
    """Return the reply when a tool matched but required arguments were not found."""
    wants = [f"`{name}` ({', '.join(params)})" for name, params in missing.items()]
    if lang == "zh":
        return f"我想调用 {'、'.join(wants)}，但你的消息里缺少括号中的参数，请补充（比如城市名）。"
    return (
        f"I'd call {', '.join(wants)}, but your message doesn't give the argument(s) in "
        "brackets. Please add them (a city name, for example)."
    )


def _call_text(name: str, args: dict) -> str:
    shown = ", ".join(
        f"{key}={clip(json.dumps(value, ensure_ascii=False, default=str), 40)}"
        for key, value in args.items()
    )
    return f"`{name}({shown})`"


def plan_line(calls: Sequence[tuple[str, dict]], lang: str) -> str:
    """Return the one-line plan said before the tool calls."""
    names = [_call_text(name, args) for name, args in calls]
    if lang == "zh":
        return f"我将调用 {len(calls)} 个工具：" + "、".join(names) + "。"
    return f"I'll call {len(calls)} tool{'s' if len(calls) != 1 else ''}: " + ", ".join(names) + "."
