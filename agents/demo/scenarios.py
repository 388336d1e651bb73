"""The demo model's script: what it recognises in a question, what it calls, what it says.

Read top to bottom, this is everything the offline demo can do. Each :class:`Scenario`
is one thing: a trigger on the question, one tool call, and answer sentences filled from
that call's JSON result. A question may trigger several scenarios ("the weather in
Hangzhou, and 17*23"); their calls go out together, in the order the question asks. The
scenarios cover the tools of the bundled agents (:data:`SHOWCASES`, agents/bundled/):
the travel assistant's and the almanac's MCP tools. The engine that plays them is
:mod:`agents.demo.script`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Scenario:
    """One thing the demo can do when a question asks for it.

    ``trigger``: a regular expression searched in the question, case-insensitive, or
    several (word orders that differ, "moon on 2026-12-24" and "2026-12-24 的月相"), the
    earliest match counting; its named groups become slots. ``tool`` and ``args``: the
    call to make, each argument a template of slots: ``{question}`` (the question as
    asked), ``{town}`` (a town the question names, else the newest one the user named
    before; a scenario taking it is called once per town named, and is repeated by a
    follow-up naming only a town, "And in Chengdu?"), or a trigger group such as
    ``{expression}``; ``{town|UTC}`` falls back to ``UTC``. A slot may name a type,
    ``{value:number}`` (:data:`agents.demo.slots.SLOT_TYPES`): an argument that is one
    typed slot takes the typed value (``30``, ``["Jan", "Feb"]``), not text. ``answer``:
    per language (``en``, ``zh``), sentence templates filled from the tool's JSON result
    by path, ``{days[0].condition}`` (a result that is not a JSON object: ``{text}`` and
    ``{lines[0]}``; the call's arguments: ``{args.title}``); the first template whose
    paths all resolve is said.
    """

    trigger: str | tuple[str, ...]
    tool: str
    args: Mapping[str, str]
    answer: Mapping[str, tuple[str, ...]]


DATE = r"\d{4}-\d\d-\d\d"
"""An ISO date, as the almanac's tools take it."""

UNITS: Mapping[str, str] = {
    **dict.fromkeys(["mm", "millimetre", "millimetres", "millimeter", "millimeters", "毫米"], "mm"),
    **dict.fromkeys(["cm", "centimetre", "centimetres", "centimeter", "centimeters", "厘米"], "cm"),
    **dict.fromkeys(["m", "metre", "metres", "meter", "meters", "米"], "m"),
    **dict.fromkeys(["km", "kms", "kilometre", "kilometres", "kilometer", "kilometers"], "km"),
    **dict.fromkeys(["公里", "千米"], "km"),
    **dict.fromkeys(["in", "inch", "inches", "英寸"], "in"),
    **dict.fromkeys(["ft", "foot", "feet", "英尺"], "ft"),
    **dict.fromkeys(["yd", "yard", "yards", "码"], "yd"),
    **dict.fromkeys(["mi", "mile", "miles", "英里"], "mi"),
    **dict.fromkeys(["nmi", "nautical mile", "nautical miles", "海里"], "nmi"),
    **dict.fromkeys(["mg", "milligram", "milligrams", "毫克"], "mg"),
    **dict.fromkeys(["g", "gram", "grams", "克"], "g"),
    **dict.fromkeys(["kg", "kilo", "kilos", "kilogram", "kilograms", "千克", "公斤"], "kg"),
    **dict.fromkeys(["t", "tonne", "tonnes", "吨"], "t"),
    **dict.fromkeys(["oz", "ounce", "ounces", "盎司"], "oz"),
    **dict.fromkeys(["lb", "lbs", "pound", "pounds", "磅"], "lb"),
    **dict.fromkeys(["st", "stone", "stones"], "st"),
    **dict.fromkeys(["c", "°c", "celsius", "摄氏度"], "C"),
    **dict.fromkeys(["f", "°f", "fahrenheit", "华氏度"], "F"),
    **dict.fromkeys(["k", "kelvin", "开尔文"], "K"),
}
"""Unit names a question may use (lower case), each to the almanac's own unit."""

_UNIT = "|".join(re.escape(name) for name in sorted(UNITS, key=len, reverse=True))
_AMOUNT = rf"(?P<value>-?\d+(?:\.\d+)?)\s*(?:degrees?\s+|度)?(?P<from_unit>{_UNIT})(?![a-z])"

PAIR = r"([^\W\d_][^\d,，、;；:：=\n]*?)\s*[:：=]?\s*(\d+(?:\.\d+)?)"
"""A chart's label and its value, "Jan 12" or "一月：12" (the groups: label, value)."""
_SERIES = rf"(?P<series>{PAIR}(?:\s*(?:[,，、;；]\s*(?:and\s+|和)?|\s+and\s+|和)\s*{PAIR})*)"

SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        trigger=r"\b(?:recommend|suggest|where (?:can|should) I|sights?|gardens?|pandas?|hotpot"
        r"|food|travel\w*|trips?|visit\w*)\b|推荐|景点|园林|熊猫|火锅|美食|旅游|旅行|好玩|攻略",
        tool="search_travel_info",
        args={"query": "{question}"},
        answer={
            "en": (
                "From the travel notes on **{results[0].city}** ({results[0].title}): "
                "{results[0].snippet}",
                "The travel notes have nothing on that.",
            ),
            "zh": (
                "旅行笔记推荐**{results[0].city_zh}**（{results[0].title}）：{results[0].snippet}",
                "旅行笔记里没有相关内容。",
            ),
        },
    ),
    Scenario(
        trigger=r"\b(?:weather|forecast|temperature|rain\w*|umbrella)\b|天气|气温|温度|预报|下雨",
        tool="weather_forecast",
        args={"town": "{town}"},
        answer={
            "en": (
                "**{town}** on {days[0].weekday}, {days[0].date}: {days[0].condition}, "
                "{days[0].low_c}–{days[0].high_c} °C, {days[0].precipitation_chance_pct}% "
                "chance of rain.",
            ),
            "zh": (
                "**{town_zh}** {days[0].date}：{days[0].condition_zh}，{days[0].low_c}–"
                "{days[0].high_c}°C，降水概率 {days[0].precipitation_chance_pct}%。",
            ),
        },
    ),
    Scenario(
        trigger=r"\b(?:b&b|bnb|guest ?house|hotels?|rooms?|place to stay)\b"
        r"|民宿|客栈|酒店|住宿|房间",
        tool="check_bnb_availability",
        args={"town": "{town}"},
        answer={
            "en": (
                "In **{town}** from {check_in}, **{available[0].name}** "
                "({available[0].neighbourhood}) has a room at ¥{available[0].price_per_night_cny} "
                "a night.",
                "No B&B in **{town}** has a free room from {check_in}.",
            ),
            "zh": (
                "**{town_zh}** {check_in} 入住：**{available[0].name_zh}**（"
                "{available[0].neighbourhood_zh}）有空房，"
                "每晚 ¥{available[0].price_per_night_cny}。",
                "**{town_zh}** {check_in} 入住的民宿都满了。",
            ),
        },
    ),
    Scenario(
        # Numbers with an operator between them; not a date such as 2025-05-01.
        trigger=r"(?<![\w.(-])(?!\d{4}-\d\d-\d\d)(?P<expression>[-(]*\d[\d.]*\)*"
        r"(?:\s*(?:\*\*|[-+*/×÷^%])\s*[-(]*\d[\d.]*\)*)+)",
        tool="calculator",
        args={"expression": "{expression}"},
        answer={
            "en": ("`{expression}` = **{result}**.",),
            "zh": ("`{expression}` = **{result}**。",),
        },
    ),
    Scenario(
        trigger=r"\b(?:what time|time (?:is it|in|now)|local time|current time)\b"
        r"|几点|什么时间|当地时间",
        tool="current_time",
        args={"timezone": "{town|UTC}"},
        answer={
            "en": (
                "In **{city}** it is {time} on {weekday}, {date} ({timezone}, UTC{utc_offset}).",
                "It is {time} on {weekday}, {date} in {timezone} (UTC{utc_offset}).",
            ),
            "zh": (
                "**{city}** 现在是 {date} {weekday_zh} {time}（{timezone}，UTC{utc_offset}）。",
                "{timezone} 现在是 {date} {weekday_zh} {time}（UTC{utc_offset}）。",
            ),
        },
    ),
    # The almanac's tools (agents/bundled/almanac_server.py, named for its server).
    Scenario(
        trigger=rf"(?P<start>{DATE})\s*(?:and|to|until|till|through|–|—|到|至|和|与)\s*(?P<end>{DATE})",
        tool="almanac_days_between",
        args={"start": "{start}", "end": "{end}"},
        answer={
            "en": (
                "From {start} ({start_weekday}) to {end} ({end_weekday}) is **{days} days** "
                "({weeks} × 7 + {extra_days}).",
            ),
            "zh": ("{start} 到 {end} 相隔 **{days} 天**（{weeks} 周零 {extra_days} 天）。",),
        },
    ),
    Scenario(
        trigger=rf"{_AMOUNT}\s*(?:in|to|into|as|是多少|等于多少|等于|换算成|换成|合|折合|=)\s*"
        rf"(?:degrees?\s+)?(?P<to_unit>{_UNIT})(?![a-z])",
        tool="almanac_convert_units",
        args={
            "value": "{value:number}",
            "from_unit": "{from_unit:unit}",
            "to_unit": "{to_unit:unit}",
        },
        answer={
            "en": ("{value:number} {from_unit} is **{result:number} {to_unit}**.",),
            "zh": ("{value:number} {from_unit} = **{result:number} {to_unit}**。",),
        },
    ),
    Scenario(
        trigger=(
            rf"(?:\bmoon\b|\blunar\b|月相|月亮)[^?!。？！]*?(?P<date>{DATE})",
            rf"(?P<date>{DATE})[^?!。？！,，\d]{{0,12}}?(?:\bmoon\b|月相|月亮|满月|新月)",
        ),
        tool="almanac_moon_phase",
        args={"date": "{date}"},
        answer={
            "en": (
                "The moon on {date}: **{phase}**, {illumination:percent} lit, "
                "{age_days} days after the new moon.",
            ),
            "zh": (
                "{date} 的月相：**{phase}**，亮面 {illumination:percent}，月龄 {age_days} 天。",
            ),
        },
    ),
    Scenario(
        trigger=(
            r"\b(?:bar ?charts?|bar graphs?|charts?|graphs?|plot)\b"
            rf"(?:\s+(?:of|for|showing)\s+(?P<title>[^:：\d]+?)\s*[:：]|\s*[:：]?)\s*{_SERIES}",
            rf"(?:(?<=[画个张幅做])(?P<title>[^\d\s:：,，。一个张幅画]{{1,12}}?)的?)?"
            rf"(?:柱状图|条形图|图表)\s*[:：]?\s*{_SERIES}",
        ),
        tool="almanac_bar_chart",
        args={"title": "{title|Chart}", "labels": "{series:labels}", "values": "{series:values}"},
        answer={
            "en": (
                "I drew the chart: open the almanac_bar_chart card above to see it ({lines[0]}).",
            ),
            "zh": ("图表已画好，展开上方的 almanac_bar_chart 工具卡片查看（{lines[0]}）。",),
        },
    ),
)

EXAMPLES = (
    "Plan 3 days in Hangzhou: sights to visit, the weather, and a B&B room.",
    "推荐一个适合看江南园林的城市，查一下苏州天气，并找一个民宿房间。",
    "What's the weather in Hangzhou, and what is 17*23?",
    "What time is it in Chengdu, and where can I see pandas?",
)
"""Questions that show the travel assistant at its best (its starters, agents.toml)."""

ALMANAC_EXAMPLES = (
    "How many days are there between 2026-01-01 and 2026-12-25, and what is 30 miles in km?",
    "What is the moon's phase on 2026-12-24?",
    "Draw a bar chart of rainfall: Jan 12, Feb 30, Mar 45.",
    "2026-12-24 的月相是什么？100 华氏度是多少摄氏度？",
)
"""Questions that show the almanac at its best (its starters, then one in Chinese)."""


@dataclass(frozen=True)
class Showcase:
    """A bundled agent the demo knows: its name, its tools, the questions its help lists."""

    agent: str
    tools: tuple[str, ...]
    examples: tuple[str, ...]


SHOWCASES: tuple[Showcase, ...] = (
    Showcase(
        agent="travel",
        tools=(
            "search_travel_info",
            "weather_forecast",
            "check_bnb_availability",
            "calculator",
            "current_time",
        ),
        examples=EXAMPLES,
    ),
    Showcase(
        agent="almanac",
        tools=(
            "almanac_convert_units",
            "almanac_days_between",
            "almanac_moon_phase",
            "almanac_bar_chart",
        ),
        examples=ALMANAC_EXAMPLES,
    ),
)
"""The help reply lists the examples of each showcase whose tools are bound, those the
bound tools can answer; an agent with none of these tools gets ``TEXT["unknown_agent"]``."""

MALFORMED_TAG = r"(?<![\w#])#malformed\b"
"""In a question, makes the first reply to it break the format (docs/strategies.md)."""

# The demo's own sentences, by language. "{examples}" is a Markdown list of the examples
# that fit the bound tools; "follow_up" is added when a town-bound tool is among them.
TEXT: Mapping[str, Mapping[str, str]] = {
    "en": {
        "greeting": "Hello! I'm the offline demo model. Ask me something to get started.",
        "sorry": "Sorry, the demo model could not handle that message. Please rephrase it.",
        "help": "I'm the offline demo model: a script, not an LLM. I can answer questions "
        "like these, calling the tools:\n\n{examples}",
        "follow_up": "\n\nand follow-ups such as “And in Chengdu?”.",
        "unknown_agent": "I'm the offline demo model: a scripted model, not an LLM. I only know "
        "the app's bundled agents ({agents}) and their tools, and this agent {has}, so I cannot "
        "answer for it without pretending. To chat with it, configure a real model: set "
        "`OPENAI_API_KEY` (and `AGENT_PROVIDER` for a server other than OpenAI's), or pick a "
        "configured model in the model picker; docs/models.md says how.",
        "unknown_tools": "has tools I do not know ({tools})",
        "no_agent_tools": "has no tools",
        "no_tools": "I'm the offline demo model: a script, not an LLM, and no tools are "
        "available in this run, so I can only reply in text.",
        "which_town": "Which town? I know: {towns}.",
        "plan": "Checking {calls}.",
        "call": "{tool} ({args})",
        "and": ", ",
        "failed": "{call} failed: {error}",
        "denied": "{call} did not run: the person reviewing it denied it{reason}. This "
        "answer goes without it.",
        "denied_reason": " (“{reason}”)",
        "expired": "{call} did not run: nobody approved it in time. This answer goes without it.",
        "policy_denied": "{call} did not run: this chat's policy does not allow it.",
        "no_sentence": "{call} answered; its card shows the result.",
        "footer": "_Scripted answer from the offline demo model, built from the tool results._",
    },
    "zh": {
        "greeting": "你好！我是离线演示模型。问我点什么吧。",
        "sorry": "抱歉，演示模型处理不了这条消息，请换个说法。",
        "help": "我是离线演示模型（脚本，不是大模型），能回答这样的问题，并调用工具：\n\n"
        "{examples}",
        "follow_up": "\n\n也可以接着问，比如“那成都呢？”。",
        "unknown_agent": "我是离线演示模型（脚本，不是大模型），只认识应用自带的智能体（{agents}）"
        "及其工具，而这个智能体{has}，我没法不装模作样地替它回答。要和它聊天，请配置真实的模型："
        "设置 `OPENAI_API_KEY`（不是 OpenAI 的服务器再设 `AGENT_PROVIDER`），或在模型选择器里"
        "选一个已配置的模型；见 docs/models.md。",
        "unknown_tools": "的工具我不认识（{tools}）",
        "no_agent_tools": "没有工具",
        "no_tools": "我是离线演示模型（脚本，不是大模型），这次没有可用的工具，只能回复文字。",
        "which_town": "哪个城市？我知道：{towns}。",
        "plan": "我来查一下：{calls}。",
        "call": "{tool}（{args}）",
        "and": "、",
        "failed": "{call}调用失败：{error}",
        "denied": "{call}没有执行：审核人拒绝了这次调用{reason}。以下回答不含它的结果。",
        "denied_reason": "（“{reason}”）",
        "expired": "{call}没有执行：没有人及时批准。以下回答不含它的结果。",
        "policy_denied": "{call}没有执行：本聊天的策略不允许调用它。",
        "no_sentence": "{call}已返回，结果见工具卡片。",
        "footer": "_（离线演示模型：根据工具结果按脚本生成，并非大模型。）_",
    },
}
