"""A throwaway job type, added the way docs/job-types.md says: this package and one
`registry.register(JOB_TYPE)`. Tests register it to prove nothing else needs to change."""
