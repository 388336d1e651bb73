"""Titles made from the question offline tell conversations apart."""

from __future__ import annotations

import pytest

from chat.store.titles import TITLE_LENGTH, title_from

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
        ("请帮我查一下苏州明天的天气，谢谢", "查一下苏州明天的天气"),
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

    assert len(title) == TITLE_LENGTH
    assert title.endswith("…")


def test_white_space_and_line_breaks_become_one_line():
    assert title_from("  Weather\n\tin   Suzhou  ") == "Weather in Suzhou"
