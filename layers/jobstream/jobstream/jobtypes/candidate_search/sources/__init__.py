"""Where candidate works come from: `catalog` (a JSON file) and `pixiv` (Pixiv's app API)."""
