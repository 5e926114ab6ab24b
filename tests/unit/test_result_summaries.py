"""How the CLI tells a result: in its job type's words (`JobType.summarize_result`), and by its
keys for a type this deployment does not know."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from jobstream.jobtypes import registry
from jobstream_cli.render import result_summary


def shown(result: dict[str, Any], job_type: str) -> str:
    out = io.StringIO()
    Console(file=out, width=10_000, color_system=None).print(result_summary(result, job_type))
    return out.getvalue()


def test_a_search_names_its_candidates_and_their_first_urls() -> None:
    candidates = [{"url": f"https://www.pixiv.net/artworks/{n}"} for n in range(5)]
    result = {"candidates": candidates, "scanned": 30, "filtered": [{"work_id": "9"}]}
    text = shown(result, "candidate_search")
    assert text.splitlines()[0] == "result: 5 candidate(s), 30 scanned, 1 filtered"
    assert text.splitlines()[1:] == [
        *(f"  https://www.pixiv.net/artworks/{n}" for n in range(3)),
        "  (+2 more)",
    ]


def test_a_fetch_names_its_files() -> None:
    asset = {"asset_id": "1_p0", "mime": "image/png", "bytes": 10, "locator": {"value": "u0"}}
    result = {"assets": [asset, {**asset, "asset_id": "1_p1", "bytes": 5}], "expires_at": 1}
    fetch = registry.get("asset_fetch")
    assert fetch is not None
    summary = fetch.summarize_result(result)
    assert summary.headline == "2 asset(s), 15 bytes"
    assert summary.items == ("1_p0: image/png, 10 bytes, u0", "1_p1: image/png, 5 bytes, u0")


def test_a_result_of_an_unknown_type_is_told_by_its_keys() -> None:
    text = shown({"pages": [1, 2], "words": 120, "nested": {"x": 1}}, "word_count")
    assert text.strip() == "result: 2 pages, words 120"
    assert shown({}, "video_upload").strip() == "result: an empty result"
