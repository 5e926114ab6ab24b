"""candidate_search: plan merging, the executor's filters and outcomes, and the catalog source."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jobstream.config.targets import Target
from jobstream.jobtypes.candidate_search import executor
from jobstream.jobtypes.candidate_search.definition import JOB_TYPE
from jobstream.jobtypes.candidate_search.executor import Outcome, run
from jobstream.jobtypes.candidate_search.plan import SearchPlan, build_plan
from jobstream.jobtypes.candidate_search.settings import CandidateSearchSettings, search_settings
from jobstream.jobtypes.context import JobInterruptedError
from jobstream.jobtypes.sources.base import (
    SearchRequest,
    SourceAsset,
    SourceError,
    Work,
)
from jobstream.jobtypes.sources.catalog import (
    DEFAULT_CATALOG,
    CatalogSource,
    catalog_path,
    load_catalog,
)
from jobstream.protocol.errors import Reason
from tests.support.job_runs import RecordingContext, job_run
from tests.support.validation import validate

# --- fakes ---------------------------------------------------------------------------------------


class FakeSource:
    """Yields the given works as-is (no matching); can fail after some works."""

    def __init__(self, works: list[Work], fail_after: int | None = None) -> None:
        self.works = works
        self.fail_after = fail_after
        self.requests: list[SearchRequest] = []
        self.yielded = 0

    def search(self, request: SearchRequest) -> Iterator[Work]:
        self.requests.append(request)
        for index, work in enumerate(self.works):
            if self.fail_after is not None and index >= self.fail_after:
                raise SourceError(Reason.RATE_LIMITED, "slow down")
            self.yielded += 1
            yield work


def work(
    work_id: str,
    tags: tuple[str, ...] = ("landscape",),
    *,
    work_type: Any = "illustration",
    url: str | None = None,
    assets: tuple[SourceAsset, ...] = (),
) -> Work:
    return Work(
        work_id=work_id,
        work_type=work_type,
        title=f"title {work_id}",
        tags=tags,
        url=f"https://www.pixiv.net/artworks/{work_id}" if url is None else url,
        author="someone",
        bookmarks=int(work_id) if work_id.isdigit() else 0,
        assets=assets,
    )


def make_target(**overrides: Any) -> CandidateSearchSettings:
    """A target's candidate_search settings, read from its entry as the targets file has it."""
    entry: dict[str, Any] = {
        "id": "demo-illustration",
        "work_type": "illustration",
        "source": "catalog",
        "query": {"tags": ["landscape"], "expand": False},
        "limit": 1,
        "scan_limit": 30,
    }
    entry.update(overrides)
    return search_settings(Target.model_validate(entry))


def make_plan(**overrides: Any) -> SearchPlan:
    fields: dict[str, Any] = {
        "source": "catalog",
        "work_type": "illustration",
        "tags": ("landscape",),
        "expand": False,
        "limit": 5,
        "scan_limit": 50,
        "work_types": ("illustration",),
    }
    fields.update(overrides)
    return SearchPlan(**fields)


def succeed(outcome: Outcome) -> dict[str, Any]:
    assert outcome.reason is None, outcome
    assert outcome.result is not None
    validate(outcome.result, "Result_CandidateSearch")
    return outcome.result


def filtered_reasons(result: dict[str, Any]) -> dict[str, str]:
    return {item["work_id"]: item["reason"] for item in result["filtered"]}


# --- plan ----------------------------------------------------------------------------------------


def test_plan_without_params_is_the_target() -> None:
    plan = build_plan({}, make_target(query={"tags": ["a", "b"], "expand": True}))
    assert plan == SearchPlan(
        source="catalog",
        work_type="illustration",
        tags=("a", "b"),
        expand=True,
        limit=1,
        scan_limit=30,
        work_types=("illustration",),
    )


def test_plan_query_overrides_target_tags_and_expand() -> None:
    target = make_target(query={"tags": ["landscape"], "expand": True})
    plan = build_plan({"query": {"tags": ["cat", "night"]}}, target)
    assert plan.tags == ("cat", "night")
    assert plan.expand is False  # a given query without expand means AND
    assert build_plan({"query": {"tags": ["cat"], "expand": True}}, make_target()).expand is True


def test_plan_constraints_apply_without_query() -> None:
    plan = build_plan({"constraints": {"limit": 3, "scan_limit": 40}}, make_target())
    assert (plan.tags, plan.limit, plan.scan_limit) == (("landscape",), 3, 40)


@pytest.mark.parametrize(
    ("constraints", "target_fields", "expected"),
    [
        ({}, {"limit": 2, "scan_limit": 10}, (2, 10)),
        ({"limit": 500}, {}, (100, 100)),  # limit clamps to 100, scan_limit rises to the limit
        ({"limit": 50}, {"scan_limit": 30}, (50, 50)),
        ({"limit": 5, "scan_limit": 2}, {}, (5, 5)),
        ({"scan_limit": 100}, {"limit": 4}, (4, 100)),
        ({"limit": 0, "scan_limit": 0}, {"limit": 3, "scan_limit": 7}, (3, 7)),  # 0 is "not given"
        ({"limit": 1, "scan_limit": 250}, {}, (1, 100)),
    ],
)
def test_plan_limit_and_scan_limit_clamping(
    constraints: dict[str, Any], target_fields: dict[str, Any], expected: tuple[int, int]
) -> None:
    plan = build_plan({"constraints": constraints}, make_target(**target_fields))
    assert (plan.limit, plan.scan_limit) == expected


def test_plan_excludes_by_kind_and_work_types() -> None:
    params = {
        "constraints": {
            "exclude": [
                {"kind": "work", "id": "1"},
                {"kind": "candidate", "id": "pixiv:2"},
                {"kind": "tag", "id": "Cat"},
                {"kind": "work", "id": "3"},
            ],
            "work_types": ["illustration", "novel"],
        }
    }
    plan = build_plan(params, make_target(source="pixiv"))
    assert plan.source == "pixiv"
    assert plan.exclude_work_ids == {"1", "3"}
    assert plan.exclude_candidate_ids == {"pixiv:2"}
    assert plan.exclude_tags == {"cat"}
    assert plan.work_types == ("illustration", "novel")
    assert plan.accepts_type("illustration")
    assert not plan.accepts_type("novel")  # the run searches the target's type only


def test_plan_is_frozen() -> None:
    plan = build_plan({}, make_target())
    with pytest.raises(AttributeError):
        plan.limit = 9  # type: ignore[misc]


# --- executor ------------------------------------------------------------------------------------


def test_candidate_document_shape_and_request() -> None:
    assets = (
        SourceAsset(
            asset_id="10_p0",
            type="image",
            role="primary",
            url="https://i.example/10_p0.png",
            width=800,
            height=600,
            mime="image/png",
        ),
        SourceAsset(
            asset_id="10_p1", type="image", role="preview", url="https://i.example/10_p1.jpg"
        ),
    )
    source = FakeSource([work("10", ("Landscape", "landscape_painting", "cat"), assets=assets)])
    plan = make_plan(tags=("landscape", "night"), expand=True, scan_limit=20)
    result = succeed(run(plan, source, RecordingContext()))
    assert source.requests == [
        SearchRequest(
            tags=("landscape", "night"), match_any=True, work_type="illustration", scan_limit=20
        )
    ]
    assert result["scanned"] == 1
    assert result["filtered"] == []
    [candidate] = result["candidates"]
    validate(candidate, "Candidate")
    assert candidate == {
        "candidate_id": "pixiv:10",
        "platform": "pixiv",
        "work_id": "10",
        "work_type": "illustration",
        "url": "https://www.pixiv.net/artworks/10",
        "tags": [
            {"tag": "Landscape", "source": "seed", "weight": 1.0},
            {"tag": "landscape_painting", "source": "related", "weight": 0.5},
        ],
        "assets": [
            {
                "asset_id": "10_p0",
                "type": "image",
                "role": "primary",
                "source": "pixiv",
                "quality": "default",
                "locator": {"kind": "url", "value": "https://i.example/10_p0.png"},
                "width": 800,
                "height": 600,
                "mime": "image/png",
            },
            {
                "asset_id": "10_p1",
                "type": "image",
                "role": "preview",
                "source": "pixiv",
                "quality": "default",
                "locator": {"kind": "url", "value": "https://i.example/10_p1.jpg"},
            },
        ],
        "metadata": {"title": "title 10", "author": "someone", "bookmarks": 10},
    }
    for asset in candidate["assets"]:
        validate(asset, "Asset")
    for tag in candidate["tags"]:
        validate(tag, "MatchedTag")


def test_limit_stops_the_scan_in_source_order() -> None:
    source = FakeSource([work(str(n)) for n in range(9, 0, -1)])
    result = succeed(run(make_plan(limit=3), source, RecordingContext()))
    assert [c["work_id"] for c in result["candidates"]] == ["9", "8", "7"]
    assert result["scanned"] == 3
    assert source.yielded == 3


def test_scan_limit_is_honoured_even_if_the_source_yields_more() -> None:
    source = FakeSource([work(str(n), work_type="novel") for n in range(40)])
    outcome = run(make_plan(limit=2, scan_limit=12), source, RecordingContext())
    assert outcome.reason == "filter_exhausted"
    assert source.yielded == 12


def test_every_filter_reason() -> None:
    works = [
        work("1"),
        work("1"),  # duplicate
        work("2", work_type="novel"),  # another type: invalid
        work("3", url=""),  # no url: invalid
        work("4"),  # excluded by work id
        work("5"),  # excluded by candidate id
        work("6", ("landscape", "CAT")),  # excluded by tag, case-insensitively
        work("7"),
    ]
    plan = make_plan(
        limit=10,
        exclude_work_ids=frozenset({"4"}),
        exclude_candidate_ids=frozenset({"pixiv:5"}),
        exclude_tags=frozenset({"cat"}),
    )
    result = succeed(run(plan, FakeSource(works), RecordingContext()))
    assert [c["work_id"] for c in result["candidates"]] == ["1", "7"]
    assert result["scanned"] == 8
    assert result["filtered"] == [
        {"work_id": "1", "reason": "duplicate"},
        {"work_id": "2", "reason": "invalid"},
        {"work_id": "3", "reason": "invalid"},
        {"work_id": "4", "reason": "excluded"},
        {"work_id": "5", "reason": "excluded"},
        {"work_id": "6", "reason": "excluded"},
    ]


def test_work_types_filter_other_types() -> None:
    # The plan's work_types (from the Task) must also allow the type the run searches.
    plan = make_plan(work_type="novel", work_types=("illustration",), limit=3)
    outcome = run(plan, FakeSource([work("1", work_type="novel")]), RecordingContext())
    assert outcome.reason == "filter_exhausted"
    plan = make_plan(work_type="novel", work_types=("novel", "illustration"), limit=3)
    result = succeed(run(plan, FakeSource([work("1", work_type="novel")]), RecordingContext()))
    assert result["candidates"][0]["work_type"] == "novel"


def test_matched_tags_sources() -> None:
    tags = executor.matched_tags(
        ("landscape", "西瓜肚"), ("西瓜肚", "LANDSCAPE_painting", "city", "landscape")
    )
    assert tags == [
        {"tag": "西瓜肚", "source": "seed", "weight": 1.0},
        {"tag": "LANDSCAPE_painting", "source": "related", "weight": 0.5},
        {"tag": "landscape", "source": "seed", "weight": 1.0},
    ]


def test_no_candidate_when_nothing_matched() -> None:
    context = RecordingContext()
    outcome = run(make_plan(), FakeSource([]), context)
    assert outcome == Outcome(reason=Reason.NO_CANDIDATE, message=outcome.message)
    assert outcome.message
    assert ("ranking", None) not in context.progress_log


def test_filter_exhausted_when_everything_was_excluded_or_invalid() -> None:
    works = [work("1"), work("2", work_type="novel"), work("1")]
    outcome = run(
        make_plan(exclude_work_ids=frozenset({"1"})), FakeSource(works), RecordingContext()
    )
    assert outcome.result is None
    assert outcome.reason == "filter_exhausted"
    assert outcome.message


def test_duplicate_exhausted_when_only_duplicates_remain() -> None:
    # A work's first sighting is a candidate or filtered for another reason, so within one run a
    # source repeating an excluded work is still filter_exhausted...
    outcome = run(
        make_plan(exclude_work_ids=frozenset({"1"})),
        FakeSource([work("1"), work("1")]),
        RecordingContext(),
    )
    assert outcome.reason == "filter_exhausted"
    # ...and duplicate_exhausted is reserved for a scan whose every dropped work was a duplicate.
    outcome = executor._empty_outcome(2, [{"work_id": "1", "reason": "duplicate"}] * 2)
    assert outcome.reason == "duplicate_exhausted"
    assert outcome.message


def test_source_error_maps_to_its_reason() -> None:
    outcome = run(
        make_plan(limit=5), FakeSource([work("1"), work("2")], fail_after=1), RecordingContext()
    )
    assert outcome == Outcome(reason=Reason.RATE_LIMITED, message="slow down")


def test_source_error_raised_at_search_time() -> None:
    class Broken:
        def search(self, request: SearchRequest) -> Iterator[Work]:
            raise SourceError(Reason.AUTH_FAILED, "bad token")

    assert run(make_plan(), Broken(), RecordingContext()) == Outcome(
        reason="auth_failed", message="bad token"
    )


def test_checkpoint_before_every_work() -> None:
    context = RecordingContext()
    result = succeed(
        run(make_plan(limit=100), FakeSource([work(str(n)) for n in range(7)]), context)
    )
    assert context.checkpoints == result["scanned"] == 7


@pytest.mark.parametrize("stop", ["cancel", "lose_lease", "pass_deadline"])
def test_job_interrupted_propagates_and_stops_the_scan(stop: str) -> None:
    source = FakeSource([work(str(n)) for n in range(20)])
    context = RecordingContext()
    getattr(context, stop)(at_checkpoint=3)
    with pytest.raises(JobInterruptedError):
        run(make_plan(limit=100), source, context)
    assert source.yielded == 3


def test_job_interrupted_is_not_swallowed_by_source_error_handling() -> None:
    class Interrupting:
        def search(self, request: SearchRequest) -> Iterator[Work]:
            raise JobInterruptedError("lease lost")

    with pytest.raises(JobInterruptedError):
        run(make_plan(), Interrupting(), RecordingContext())


def test_progress_calls() -> None:
    context = RecordingContext()
    works = [work(str(n)) for n in range(25)]
    plan = make_plan(tags=("landscape", "cat"), expand=True, limit=100, scan_limit=100)
    succeed(run(plan, FakeSource(works), context))
    assert context.progress_log == [
        ("searching", "searching 2 tag(s)"),
        ("searching", "scanned 10 works, 10 candidates"),
        ("searching", "scanned 20 works, 20 candidates"),
        ("ranking", None),
    ]


# --- catalog source ------------------------------------------------------------------------------


def catalog_entry(work_id: str, tags: list[str], work_type: str = "illustration") -> dict[str, Any]:
    return {
        "work_id": work_id,
        "work_type": work_type,
        "title": f"t{work_id}",
        "tags": tags,
        "url": f"https://www.pixiv.net/artworks/{work_id}",
        "author": "a",
        "bookmarks": 3,
        "assets": [
            {
                "asset_id": f"{work_id}_p0",
                "type": "image",
                "role": "primary",
                "url": f"https://i.example/{work_id}.png",
                "width": 10,
                "height": 20,
                "mime": "image/png",
            }
        ],
    }


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    path = tmp_path / "catalog.json"
    works = [
        catalog_entry("9", ["landscape"]),
        catalog_entry("100", ["Landscape", "night"]),
        catalog_entry("20", ["night"]),
        catalog_entry("3", ["landscape", "night"], "novel"),
        catalog_entry("55", ["landscape_painting"]),
        catalog_entry("7", ["night", "LANDSCAPE"]),
    ]
    path.write_text(json.dumps({"works": works}), encoding="utf-8")
    return path


def ids(source: CatalogSource, tags: tuple[str, ...], match_any: bool, **kw: Any) -> list[str]:
    request = SearchRequest(
        tags=tags,
        match_any=match_any,
        work_type=kw.get("work_type", "illustration"),
        scan_limit=kw.get("scan_limit", 100),
    )
    return [w.work_id for w in source.search(request)]


def test_catalog_all_vs_any_newest_first(catalog: Path) -> None:
    source = CatalogSource(catalog)
    assert ids(source, ("landscape",), False) == ["100", "9", "7"]  # exact, case-insensitive
    assert ids(source, ("LANDSCAPE", "night"), False) == ["100", "7"]
    assert ids(source, ("landscape", "night"), True) == ["100", "20", "9", "7"]
    assert ids(source, ("landscape",), False, work_type="novel") == ["3"]
    assert ids(source, ("landscape", "night"), True, scan_limit=2) == ["100", "20"]


def test_catalog_works_carry_assets(catalog: Path) -> None:
    [first] = CatalogSource(catalog).search(SearchRequest(("night",), False, "illustration", 1))
    assert first.assets == (
        SourceAsset(
            asset_id="100_p0",
            type="image",
            role="primary",
            url="https://i.example/100.png",
            width=10,
            height=20,
            mime="image/png",
        ),
    )
    assert (first.title, first.author, first.bookmarks) == ("t100", "a", 3)


def test_catalog_scan_delay_uses_the_injected_sleep(catalog: Path) -> None:
    sleeps: list[float] = []
    source = CatalogSource(catalog, scan_delay_ms=250, sleep=sleeps.append)
    assert len(ids(source, ("landscape", "night"), True)) == 4
    assert sleeps == [0.25, 0.25, 0.25]  # between works, not before the first
    sleeps.clear()
    ids(CatalogSource(catalog, sleep=sleeps.append), ("night",), False)
    assert sleeps == []


def test_catalog_is_cached_by_path_and_mtime(catalog: Path) -> None:
    load_catalog.cache_clear()
    source = CatalogSource(catalog)
    ids(source, ("night",), False)
    ids(source, ("night",), False)
    assert load_catalog.cache_info().hits == 1
    assert load_catalog.cache_info().misses == 1
    catalog.write_text(json.dumps({"works": [catalog_entry("5", ["night"])]}), encoding="utf-8")
    stat = catalog.stat()
    os.utime(catalog, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert ids(source, ("night",), False) == ["5"]
    assert load_catalog.cache_info().misses == 2


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("not json", "is invalid"),
        (json.dumps({"items": []}), "works"),
        (json.dumps({"works": [{**catalog_entry("1", ["a"]), "work_id": "x1"}]}), "work_id"),
        (json.dumps({"works": [{**catalog_entry("1", ["a"]), "work_type": "video"}]}), "work_type"),
        (json.dumps({"works": [{**catalog_entry("1", ["a"]), "bookmarks": "3"}]}), "bookmarks"),
        (json.dumps({"works": [{**catalog_entry("1", ["a"]), "colour": "red"}]}), "colour"),
        (json.dumps({"works": [{**catalog_entry("1", ["a"]), "extra": {}}]}), "extra"),
        (json.dumps({"works": [{**catalog_entry("1", ["a"]), "url": ""}]}), "url and tags"),
        (json.dumps({"works": [catalog_entry("1", ["a", ""])]}), "url and tags"),
        (
            json.dumps(
                {
                    "works": [
                        {
                            **catalog_entry("1", ["a"]),
                            "assets": [
                                {"asset_id": "", "type": "image", "role": "primary", "url": "u"}
                            ],
                        }
                    ]
                }
            ),
            "asset_id and url",
        ),
        (
            json.dumps(
                {
                    "works": [
                        {
                            **catalog_entry("1", ["a"]),
                            "assets": [
                                {"asset_id": "p0", "type": "image", "role": "primary", "url": ""}
                            ],
                        }
                    ]
                }
            ),
            "asset_id and url",
        ),
        (
            json.dumps({"works": [catalog_entry("1", ["a"]), catalog_entry("1", ["b"])]}),
            "duplicate",
        ),
    ],
)
def test_catalog_rejects_bad_files(tmp_path: Path, content: str, fragment: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(SourceError) as caught:
        CatalogSource(path).search(SearchRequest(("a",), False, "illustration", 10))
    assert caught.value.reason == "configuration_error"
    assert "bad.json" in caught.value.message
    assert fragment in caught.value.message


def test_catalog_missing_file_is_a_configuration_error(tmp_path: Path) -> None:
    outcome = run(make_plan(), CatalogSource(tmp_path / "nope.json"), RecordingContext())
    assert outcome.reason == "configuration_error"
    assert outcome.message is not None
    assert "nope.json" in outcome.message


def test_the_catalog_passes_the_gate_once_per_search_and_once_per_work(catalog: Path) -> None:
    context = RecordingContext()
    source = CatalogSource(catalog, before_request=context.before_source_request)
    assert ids(source, ("landscape",), False) == ["100", "9", "7"]
    assert context.source_requests == 1
    assert source.work("9") is not None
    assert context.source_requests == 2
    context.stop_source_requests()
    with pytest.raises(JobInterruptedError):
        ids(source, ("landscape",), False)


def test_a_catalog_job_passes_the_jobs_gate(monkeypatch: pytest.MonkeyPatch, catalog: Path) -> None:
    monkeypatch.setenv("JOBSTREAM_CATALOG", str(catalog))
    target = Target.model_validate(
        {"id": "t", "work_type": "illustration", "source": "catalog", "query": {"tags": ["night"]}}
    )
    context = RecordingContext()
    outcome = JOB_TYPE.run(job_run({}, target=target, context=context))
    assert outcome.result is not None, outcome
    assert context.source_requests == 1


def test_catalog_path_from_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("JOBSTREAM_CATALOG", raising=False)
    assert catalog_path() == DEFAULT_CATALOG
    monkeypatch.setenv("JOBSTREAM_CATALOG", str(tmp_path / "c.json"))
    assert catalog_path() == tmp_path / "c.json"


def test_sample_catalog_content() -> None:
    raw = json.loads(DEFAULT_CATALOG.read_text(encoding="utf-8"))["works"]
    assert len(raw) >= 240
    assert len({w["work_id"] for w in raw}) == len(raw)
    landscape = [w for w in raw if w["work_type"] == "illustration" and "landscape" in w["tags"]]
    assert len(landscape) >= 30
    assert {w["work_type"] for w in raw} == {"illustration", "novel"}
    assert all(1 <= len(w["assets"]) <= 3 for w in raw)
    assert DEFAULT_CATALOG.stat().st_size < 300_000
    tags = {tag for w in raw for tag in w["tags"]}
    assert {"西瓜肚", "botefuku", "city", "night", "ocean", "forest", "portrait", "cat"} <= tags
    assert any("landscape" in tag and tag != "landscape" for tag in tags)
    for entry in raw:
        prefix = (
            "https://www.pixiv.net/artworks/"
            if entry["work_type"] == "illustration"
            else "https://www.pixiv.net/novel/show.php?id="
        )
        assert entry["url"] == prefix + entry["work_id"]


def test_default_target_end_to_end_on_the_sample_catalog() -> None:
    plan = build_plan({"constraints": {"limit": 5}}, make_target())
    context = RecordingContext()
    result = succeed(run(plan, CatalogSource(DEFAULT_CATALOG), context))
    assert len(result["candidates"]) == 5
    work_ids = [int(c["work_id"]) for c in result["candidates"]]
    assert work_ids == sorted(work_ids, reverse=True)
    for candidate in result["candidates"]:
        assert candidate["work_type"] == "illustration"
        assert {"tag": "landscape", "source": "seed", "weight": 1.0} in candidate["tags"]
        assert 1 <= len(candidate["assets"]) <= 3


def test_sample_catalog_expand_and_excludes() -> None:
    source = CatalogSource(DEFAULT_CATALOG)
    either = build_plan(
        {"query": {"tags": ["ocean", "forest"], "expand": True}, "constraints": {"limit": 100}},
        make_target(),
    )
    both = build_plan(
        {"query": {"tags": ["ocean", "forest"]}, "constraints": {"limit": 100}}, make_target()
    )
    any_result = succeed(run(either, source, RecordingContext()))
    all_outcome = run(both, source, RecordingContext())
    all_count = len(all_outcome.result["candidates"]) if all_outcome.result else 0
    assert len(any_result["candidates"]) > all_count
    first = any_result["candidates"][0]
    excluded = build_plan(
        {
            "query": {"tags": ["ocean", "forest"], "expand": True},
            "constraints": {
                "limit": 1,
                "exclude": [{"kind": "candidate", "id": first["candidate_id"]}],
            },
        },
        make_target(),
    )
    again = succeed(run(excluded, source, RecordingContext()))
    assert again["filtered"] == [{"work_id": first["work_id"], "reason": "excluded"}]
    assert again["candidates"][0]["work_id"] != first["work_id"]


# -- a result larger than the job item keeps (store/budgets.py) --------------------------------


def _result(sizes: list[int]) -> dict[str, Any]:
    return {
        "candidates": [
            {
                "candidate_id": f"pixiv:{index}",
                "platform": "pixiv",
                "work_id": str(index),
                "work_type": "illustration",
                "metadata": {"title": "t" * size},
            }
            for index, size in enumerate(sizes)
        ],
        "scanned": len(sizes) + 1,
        "filtered": [{"work_id": "99", "reason": "duplicate"}],
    }


def _bytes(result: dict[str, Any]) -> int:
    return len(json.dumps(result))


def test_a_result_that_fits_is_kept_as_it_is() -> None:
    result = _result([10, 10])
    assert executor.fit_result(result, lambda _: True) is result


@pytest.mark.parametrize("budget", [700, 1_000, 2_000, 5_000])
def test_a_result_over_budget_keeps_its_best_candidates_and_names_the_others(budget: int) -> None:
    result = _result([100, 400, 50, 900, 20])
    cut = executor.fit_result(result, lambda value: _bytes(value) <= budget)
    assert cut is not None
    assert _bytes(cut) <= budget
    kept = len(cut["candidates"])
    assert cut["candidates"] == result["candidates"][:kept]
    assert cut["filtered"] == result["filtered"] + [
        {"work_id": candidate["work_id"], "reason": "other"}
        for candidate in result["candidates"][kept:]
    ]
    assert cut["scanned"] == result["scanned"]
    validate(cut, "Result_CandidateSearch")
    # The longest run of best candidates that fits: one more would not.
    if kept < len(result["candidates"]):
        assert (
            _bytes(
                {
                    **cut,
                    "candidates": result["candidates"][: kept + 1],
                    "filtered": cut["filtered"][:-1],
                }
            )
            > budget
        )


def test_a_result_whose_best_candidate_alone_does_not_fit_is_refused() -> None:
    result = _result([5_000, 10])
    assert executor.fit_result(result, lambda value: _bytes(value) <= 2_000) is None
    assert executor.fit_result(_result([]), lambda _: False) is None
