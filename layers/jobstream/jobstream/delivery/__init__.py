"""Callback delivery: requests, signing, failure classification, backoff, SSRF guard."""
