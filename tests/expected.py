"""What the offline model must answer, derived from the tools' own results: the weather depends on
the pinned date, so no test hard-codes a reading."""

from __future__ import annotations


def warmer_city(first: dict, second: dict, chinese: bool) -> str | None:
    """The name the answer must give as warmer, or None for equal highs."""
    if first["high"] == second["high"]:
        return None
    warmer = first if first["high"] > second["high"] else second
    return warmer["city_zh"] if chinese else warmer["city"]


def assert_names_the_warmer_city(answer: str, first: dict, second: dict, chinese: bool) -> None:
    warmer = warmer_city(first, second, chinese)
    if warmer is None:
        assert ("相同" if chinese else "same high") in answer
        return
    gap = abs(first["high"] - second["high"])
    if chinese:
        assert f"{warmer}比" in answer and f"暖 {gap}" in answer
    else:
        assert f"{warmer} is {gap}" in answer and "warmer than" in answer


def assert_names_the_colder_city(answer: str, first: dict, second: dict) -> None:
    """A question about the colder city is answered with the colder city, not the warmer one."""
    if first["high"] == second["high"]:
        assert "same high" in answer
        return
    colder = first if first["high"] < second["high"] else second
    gap = abs(first["high"] - second["high"])
    assert f"{colder['city']} is {gap}" in answer and "colder than" in answer


def chinese_comparison(first: dict, second: dict) -> str:
    """What a Chinese answer comparing two forecasts names: the gap (温差), or equal highs (相同)."""
    return "相同" if first["high"] == second["high"] else "温差"
