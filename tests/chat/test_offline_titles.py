"""Titles made from the question offline tell conversations apart."""

from __future__ import annotations

import pytest

from chat.store.titles import TITLE_LENGTH, WIDE_TITLE_LENGTH, title_from

TRAVEL = "Plan 3 days in {town}: sights to visit, the weather, and a B&B room."


def test_five_trips_to_different_towns_get_five_titles_that_start_with_the_town():
    towns = ["Hangzhou", "Shanghai", "Suzhou", "Nanjing", "Xi'an"]

    titles = [title_from(TRAVEL.format(town=town)) for town in towns]

    assert len(set(titles)) == 5
    for town, title in zip(towns, titles, strict=True):
        assert title.startswith(f"{town}, 3 days: sights"), title
        assert len(title) <= TITLE_LENGTH
    assert titles[0] == "Hangzhou, 3 days: sights to visit, weather, B&B room"


@pytest.mark.parametrize(
    ("question", "title"),
    [
        ("Can you plan a 2-day trip to Suzhou with gardens and food?",
         "Suzhou, 2 days with gardens and food"),
        ("Plan a weekend in New York City, please", "New York City, weekend"),
        ("Plan a trip to Suzhou", "Trip to Suzhou"),
        ("What's the weather in Suzhou this weekend?", "Weather in Suzhou this weekend"),
        ("Hi, what is 17*23?", "17*23"),
        ("请帮我查一下苏州明天的天气，谢谢", "苏州明天的天气"),
        ("hello", "hello"),
    ],
)  # fmt: skip
def test_openers_every_question_shares_are_dropped(question, title):
    assert title_from(question) == title


def test_a_name_the_cut_would_lose_is_kept_in_front():
    question = ("I'm travelling with my family next month and would love to know what the "
                "weather will be like in Suzhou and Wuxi")  # fmt: skip

    title = title_from(question)

    assert title.startswith("Suzhou, Wuxi: I'm travelling")
    assert title.endswith("…")
    assert len(title) <= TITLE_LENGTH


def test_two_long_questions_differing_only_in_their_last_words_get_different_titles():
    stem = "I would like to know everything about the cheapest way to get from the airport to "

    first, second = title_from(stem + "Hangzhou East"), title_from(stem + "Suzhou North")

    assert first != second
    assert "Hangzhou" in first and "Suzhou" in second


def test_a_long_title_is_cut_at_a_word_not_inside_one():
    title = title_from("Compare " + "museum gallery temple garden " * 6)

    assert len(title) <= TITLE_LENGTH
    assert title.endswith("…")
    assert title[:-1].split()[-1] in {"museum", "gallery", "temple", "garden"}


def test_text_without_spaces_is_cut_to_the_limit():
    title = title_from("杭州" * 50)

    assert len(title) == WIDE_TITLE_LENGTH
    assert title.endswith("…")


STARTER_ZH = "推荐一个适合看江南园林的城市，查一下{town}天气，并找一个民宿房间。"
LIST_SHOWS = 11  # Chinese characters the conversation list shows of a title


def test_the_chinese_starter_gets_a_short_title_whose_visible_part_names_its_town():
    towns = ["苏州", "杭州", "上海", "扬州"]

    titles = [title_from(STARTER_ZH.format(town=town)) for town in towns]

    assert titles[0] == "苏州天气，适合看江南园林的城市，民宿房间"
    assert len({title[:LIST_SHOWS] for title in titles}) == len(towns)
    for town, title in zip(towns, titles, strict=True):
        assert title.startswith(town), title
        assert len(title) <= WIDE_TITLE_LENGTH


@pytest.mark.parametrize(
    ("question", "title"),
    [
        ("我想去广州玩三天，有什么推荐吗？", "去广州玩三天，有什么推荐"),
        ("17乘以23等于多少？", "17乘以23等于多少"),
        ("東京の天気を教えてください", "東京の天気"),
        ("京都で3日間の旅行を計画してください。", "京都で3日間の旅行を計画"),
    ],
)  # fmt: skip
def test_chinese_and_japanese_requests_lose_their_request_words(question, title):
    assert title_from(question) == title


def test_places_a_long_unspaced_question_names_late_are_put_in_front():
    question = "帮我看看明天早上出发的高铁票价和酒店价格哪个更便宜一些的城市是苏州还是杭州"

    title = title_from(question)

    assert title.startswith("苏州、杭州：")
    assert len(title) <= WIDE_TITLE_LENGTH


def test_a_spaced_language_with_a_chinese_place_keeps_the_english_rules():
    assert title_from("What's the weather in 苏州 tomorrow?") == "Weather in 苏州 tomorrow"


def test_white_space_and_line_breaks_become_one_line():
    assert title_from("  Weather\n\tin   Suzhou  ") == "Weather in Suzhou"
