"""The protocol documents as the services build them: in the deployed job types' own words
(their first stage, their empty result), which the job-type registry answers."""

from __future__ import annotations

from functools import partial

from jobstream.jobtypes import registry
from jobstream.protocol import documents

job_document = partial(documents.job_document, words=registry)
event_document = partial(documents.event_document, words=registry)
event_page = partial(documents.event_page, words=registry)
job_page = partial(documents.job_page, words=registry)
submission = partial(documents.submission, words=registry)
