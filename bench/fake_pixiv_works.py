"""What the fake Pixiv (fake_pixiv.py) answers with: deterministic app-API documents.

Any search word has works: `works_per_tag` of them, newest first, their ids and dates derived
from the word alone (the same word, the same works, in every run). A detail answers for any id.
Only the fields jobstream reads, and a few Pixiv always sends, are filled in.
"""

from __future__ import annotations

import zlib
from datetime import datetime, timedelta, timezone
from typing import Any, Final, Literal
from urllib.parse import urlencode

Kind = Literal["illust", "novel"]

# Pixiv's own time zone: its create_date values carry +09:00.
_PIXIV_TZ: Final = timezone(timedelta(hours=9))
# The newest work of every word: a fixed instant keeps the documents the same in every run.
_NEWEST: Final = datetime(2026, 1, 1, 12, 0, tzinfo=_PIXIV_TZ)
# Ids of different words fall in different ranges (a million ids per word, by its CRC).
_ID_BASE: Final = 100_000_000
_ID_SPAN: Final = 1_000_000
_FAKE_TAG: Final = "fake-pixiv"
_IMAGE_HOST: Final = "https://i.pximg.net"

# The bodies Pixiv answers a refused request with.
RATE_LIMIT_BODY: Final = {
    "error": {"user_message": "", "message": "Rate Limit", "reason": "", "user_message_details": {}}
}
UNAVAILABLE_BODY: Final = {
    "error": {
        "user_message": "",
        "message": "Service Unavailable",
        "reason": "",
        "user_message_details": {},
    }
}
# An access token the fake never issued, or revoked: what Pixiv says of an expired one.
EXPIRED_ACCESS_TOKEN_BODY: Final = {
    "error": {
        "user_message": "",
        "message": "Error occurred at the OAuth process. Please check your Access Token to fix "
        "this. Error Message: invalid_grant",
        "reason": "",
        "user_message_details": {},
    }
}
INVALID_GRANT_BODY: Final = {
    "has_error": True,
    "errors": {"system": {"message": "invalid_grant", "code": 1508}},
    "error": "invalid_grant",
}
NOT_FOUND_BODY: Final = {
    "error": {"user_message": "", "message": "Not Found", "reason": "", "user_message_details": {}}
}


def token_body(access_token: str, refresh_token: str, user_id: int) -> dict[str, Any]:
    """The OAuth token endpoint's answer to a refresh_token grant (pixivpy3 reads `response`)."""
    token = {
        "access_token": access_token,
        "expires_in": 3600,
        "token_type": "bearer",
        "scope": "",
        "refresh_token": refresh_token,
        "user": {"id": str(user_id), "name": f"fake-user-{user_id}", "account": "fake"},
    }
    return {**token, "response": token}


def newest_id(word: str, works_per_tag: int) -> int:
    """The id of the newest work a search for `word` finds; the others count down from it."""
    return _ID_BASE + (zlib.crc32(word.encode("utf-8")) % 1000) * _ID_SPAN + works_per_tag


def search_body(
    kind: Kind, word: str, offset: int, *, page_size: int, works_per_tag: int, next_base: str
) -> dict[str, Any]:
    """One page of a search for `word` from `offset`; `next_url` (under `next_base`, the
    search's own URL) names the next page while there is one."""
    first = newest_id(word, works_per_tag)
    end = min(offset + page_size, works_per_tag)
    tags = tuple(word.split()) or (word,)
    items = [_item(kind, first - index, index, tags) for index in range(offset, end)]
    body: dict[str, Any] = {f"{kind}s": items, "next_url": None}
    if end < works_per_tag:
        query = {
            "word": word,
            "search_target": "exact_match_for_tags",
            "sort": "date_desc",
            "offset": end,
        }
        if kind == "illust":
            query["filter"] = "for_ios"
        body["next_url"] = f"{next_base}?{urlencode(query)}"
    return body


def detail_body(kind: Kind, work_id: int) -> dict[str, Any]:
    """The detail of any work id (`illust` or `novel`), tagged with the fake's own tag only."""
    return {kind: _item(kind, work_id, 0, ())}


def _item(kind: Kind, work_id: int, age: int, tags: tuple[str, ...]) -> dict[str, Any]:
    # One hour older per place in the word's list: newest first by date as by id.
    created = _NEWEST - timedelta(hours=age)
    stamp = created.strftime("%Y/%m/%d/%H/%M/%S")
    item: dict[str, Any] = {
        "id": work_id,
        "title": f"fake {kind} {work_id}",
        "tags": [{"name": tag, "translated_name": None} for tag in (*tags, _FAKE_TAG)],
        "user": {"id": 1000 + work_id % 97, "name": f"artist {work_id % 97}", "account": "fake"},
        "create_date": created.isoformat(),
        "total_bookmarks": work_id % 50,
        "x_restrict": 0,
        "restrict": 0,
        "visible": True,
    }
    if kind == "illust":
        item["type"] = "illust"
        item["width"], item["height"] = 1200, 1600
        item["page_count"] = 1
        master = f"img-master/img/{stamp}/{work_id}_p0_master1200.jpg"
        item["image_urls"] = {
            "medium": f"{_IMAGE_HOST}/c/540x540_70/{master}",
            "large": f"{_IMAGE_HOST}/c/600x1200_90/{master}",
        }
    else:
        item["text_length"] = 4000
        cover = f"novel-cover-master/img/{stamp}/ci{work_id}_master1200.jpg"
        item["image_urls"] = {"large": f"{_IMAGE_HOST}/c/240x480_80/{cover}"}
    return item
