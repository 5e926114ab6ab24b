"""Where works and their files come from, for every job type: `catalog` (a JSON file and the
files beside it) and `pixiv` (Pixiv's app API)."""
