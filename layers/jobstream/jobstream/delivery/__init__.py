"""Callback delivery: the POST, signing, failure classification."""
