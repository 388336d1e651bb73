"""The demo model's script: what it recognises in a question, what it calls, what it says.

Read top to bottom, this is everything the offline demo can do. Each :class:`Scenario`
is one thing: a trigger on the question, one tool call, and answer sentences filled from
that call's JSON result. A question may trigger several scenarios ("the weather in
Hangzhou, and 17*23"); their calls go out together, in the order the question asks. The
engine that plays them is :mod:`agents.demo.script`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Scenario:
    """One thing the demo can do when a question asks for it.

    ``trigger``: a regular expression searched in the question, case-insensitive; its
    named groups become slots. ``tool`` and ``args``: the call to make, each argument a
    template of slots: ``{question}`` (the question as asked), ``{town}`` (a town the
    question names, else the newest one the user named before; a scenario taking it is
    called once per town named, and is repeated by a follow-up naming only a town, "And
    in Chengdu?"), or a trigger group such as ``{expression}``; ``{town|UTC}`` falls back
    to ``UTC``. ``answer``: per language (``en``, ``zh``), sentence templates filled from
    the tool's JSON result by path, ``{days[0].condition}``; the first template whose
    paths all resolve is said.
    """

    trigger: str
    tool: str
    args: Mapping[str, str]
    answer: Mapping[str, tuple[str, ...]]


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
)

EXAMPLES = (
    "Plan 3 days in Hangzhou: sights to visit, the weather, and a B&B room.",
    "推荐一个适合看江南园林的城市，查一下苏州天气，并找一个民宿房间。",
    "What's the weather in Hangzhou, and what is 17*23?",
    "What time is it in Chengdu, and where can I see pandas?",
)
"""Questions that show the demo at its best (the empty chat page offers the same)."""

MALFORMED_TAG = r"(?<![\w#])#malformed\b"
"""In a question, makes the first reply to it break the format (docs/strategies.md)."""

# The demo's own sentences, by language. "{examples}" is a Markdown list of EXAMPLES.
TEXT: Mapping[str, Mapping[str, str]] = {
    "en": {
        "greeting": "Hello! I'm the offline demo model. Ask me something to get started.",
        "sorry": "Sorry, the demo model could not handle that message. Please rephrase it.",
        "help": "I'm the offline demo model: a script, not an LLM. I can answer questions "
        "like these, calling the tools:\n\n{examples}\n\nand follow-ups such as "
        "“And in Chengdu?”.",
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
        "{examples}\n\n也可以接着问，比如“那成都呢？”。",
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
