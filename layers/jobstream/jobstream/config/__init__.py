"""Configuration: one settings model read from the environment, and the targets file."""
