"""Job types: what a job of each type does when it runs."""
