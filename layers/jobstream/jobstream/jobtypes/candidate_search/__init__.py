"""candidate_search: find candidate works for a tag query on a configured target."""
