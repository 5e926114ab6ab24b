"""Callback delivery: requests, signing, failure classification, SSRF guard."""
