"""Write the scripted demo model's text replies: the final answer, the plan, fallbacks.

The final answer opens with a lead that answers the question where a result's shape allows
it (a recommended city, the first day's weather, a calculation; see
:mod:`agents.models.demo_lead`) and says how many calls failed; when every call failed it
says so instead. Below, each ToolMessage is listed under its tool's name and arguments: an
error (``status="error"`` or an ``"error"`` key in the JSON) is said plainly with its reason,
anything else is summarised from its JSON shape by :mod:`agents.models.demo_summary`.
Replies are in Chinese when the user's question contains CJK characters, else English.
Every value taken from the question, the arguments or the results goes through
:func:`agents.models.demo_text.escape_markdown` (or ``code_span``), so "9**9" or a Markdown
link the user typed shows as written instead of turning into bold text or a link.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage

from agents.models.demo_args import is_place_param
from agents.models.demo_lead import lead_sentence
from agents.models.demo_routing import ToolInfo
from agents.models.demo_summary import TEXT, scalar, summarise
from agents.models.demo_text import clip, code_span, content_text, escape_markdown
from agents.tools.places import PLACES

_TEXT = {
    "en": {
        "intro": "Here is what the tools returned:",
        "failed": "failed",
        "one_failed": "Sorry, I can't answer that from data: the tool call failed. Here is why:",
        "all_failed": "Sorry, I can't answer that from data: all {n} tool calls failed. "
        "Here is why:",
        "some_failed": "({n} of {total} tool calls failed; see below.)",
        "footer": "_Scripted demo answer built from the tool results (no LLM involved)._",
        "which_town": "Which town? I know: {towns}.",
        "which_other": "What {what} should I use for {tool}?",
        "plan_one": "Checking {calls}.",
        "plan_many": "Checking {n} things: {calls}.",
    },
    "zh": {
        "intro": "以下是工具返回的结果：",
        "failed": "调用失败",
        "one_failed": "抱歉，工具调用失败，无法根据数据回答。原因如下：",
        "all_failed": "抱歉，{n} 个工具调用都失败了，无法根据数据回答。原因如下：",
        "some_failed": "（{total} 个工具调用中有 {n} 个失败，见下。）",
        "footer": "_（演示模型：根据工具结果按脚本生成，并非大模型。）_",
        "which_town": "哪个城市？我知道这些：{towns}。",
        "which_other": "{tool} 还需要 {what}，请补充。",
        "plan_one": "我来查一下：{calls}。",
        "plan_many": "我来查 {n} 项：{calls}。",
    },
}
# "Error: tool 'x' failed: ValueError: " repeats what the answer line says already.
_ERROR_PREFIX = re.compile(
    r"^\s*error:\s*(?:tool\s+'[^']*'\s+failed:\s*)?(?:[A-Za-z_.]*(?:Error|Exception):\s*)?",
    re.I,
)


def _parse(content: str) -> Any:
    try:
        return json.loads(content)
    except (ValueError, TypeError):
        return content


def _args_hint(args: Any) -> str:
    if not isinstance(args, dict):
        return ""
    values = [
        f"{escape_markdown(k)}={escape_markdown(clip(str(v), 40))}"
        for k, v in args.items()
        if scalar(v)
    ][:2]
    return f" ({', '.join(values)})" if values else ""


def answer_from_results(
    results: Sequence[ToolMessage], request: AIMessage | None, lang: str
) -> str:
    """Return a Markdown answer: a lead that answers, then each ToolMessage summarised.

    Errors are said plainly with their reason; when every call failed the answer opens by
    saying it cannot answer from data.
    """
    text = _TEXT[lang]
    calls = {c.get("id"): c for c in (request.tool_calls if request else [])}
    lines: list[str] = []
    leads: list[str] = []
    failures = 0
    for message in results:
        call = calls.get(message.tool_call_id, {})
        name = message.name or call.get("name") or "tool"
        label = f"**{escape_markdown(name)}**{_args_hint(call.get('args'))}"
        payload = _parse(content_text(message.content))
        error = payload.get("error") if isinstance(payload, dict) else None
        if message.status == "error" or error:
            failures += 1
            reason = _ERROR_PREFIX.sub("", str(error if error else payload)) or str(payload)
            lines.append(f"- {label} {text['failed']}: {escape_markdown(clip(reason, 300))}")
            continue
        known = frozenset(str(v) for v in (call.get("args") or {}).values())
        lead = lead_sentence(payload, lang, known)
        if lead and len(leads) < 3:
            leads.append(lead)
        body = [line for line in summarise(payload, lang, known) if line] or [TEXT[lang]["none"]]
        if len(body) == 1:
            lines.append(f"- {label}: {body[0]}")
        else:
            lines.append(f"- {label}:")
            lines.extend(f"  - {line}" for line in body)
    if results and failures == len(results):
        opening = [text["one_failed"] if failures == 1 else text["all_failed"].format(n=failures)]
    else:
        if failures:
            leads.append(text["some_failed"].format(n=failures, total=len(results)))
        opening = [("" if lang == "zh" else " ").join(leads), ""] if leads else []
        opening.append(text["intro"])
    return "\n".join([*opening, "", *lines, "", text["footer"]])


def capabilities_reply(question: str, tools: Sequence[tuple[str, str]], lang: str) -> str:
    """Return the reply for a message no tool matched: what the demo can do."""
    said = escape_markdown(clip(question, 80))
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
    listing = "\n".join(
        f"- {code_span(name)}: {escape_markdown(clip(desc.split('.')[0], 90))}"
        for name, desc in tools
    )
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


def _param_wording(param: str, schema: Any) -> str:
    """Return how to ask for ``param``: its name, with its schema description if it has one."""
    words = param.replace("_", " ")
    description = schema.get("description") if isinstance(schema, dict) else None
    if isinstance(description, str) and description.strip():
        first = re.split(r"(?<=\w\w)\.\s", description.strip(), maxsplit=1)[0]
        return f"{escape_markdown(words)} ({escape_markdown(clip(first.rstrip('.'), 100))})"
    return escape_markdown(words)


def missing_reply(missing: dict[str, list[str]], tools: Sequence[ToolInfo], lang: str) -> str:
    """Return the reply when a tool matched but required arguments were not found.

    A missing place asks "Which town?" with the towns the gazetteer knows; any other
    argument is asked for by name and schema description.
    """
    text = _TEXT[lang]
    schemas = {tool.name: tool.properties for tool in tools}
    asks: list[str] = []
    for tool, params in missing.items():
        for param in params:
            if is_place_param(param):
                sep = "、" if lang == "zh" else ", "
                towns = sep.join(p.name_zh if lang == "zh" else p.name for p in PLACES)
                ask = text["which_town"].format(towns=towns)
            else:
                what = _param_wording(param, schemas.get(tool, {}).get(param))
                ask = text["which_other"].format(what=what, tool=escape_markdown(tool))
            if ask not in asks:
                asks.append(ask)
    return ("" if lang == "zh" else " ").join(asks)


def _call_text(name: str, args: dict, lang: str) -> str:
    shown = [
        escape_markdown(clip(v, 30)) for v in args.values() if isinstance(v, str) and v.strip()
    ][:2]
    name = escape_markdown(name)
    if not shown:
        return name
    return f"{name}（{'，'.join(shown)}）" if lang == "zh" else f"{name} ({', '.join(shown)})"


def plan_line(calls: Sequence[tuple[str, dict]], lang: str) -> str:
    """Return the one-line plan said before the tool calls, e.g. "Checking 2 things: ..."."""
    text = _TEXT[lang]
    shown = ("、" if lang == "zh" else ", ").join(_call_text(n, a, lang) for n, a in calls)
    if len(calls) == 1:
        return text["plan_one"].format(calls=shown)
    return text["plan_many"].format(n=len(calls), calls=shown)
