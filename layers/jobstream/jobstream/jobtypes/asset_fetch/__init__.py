"""asset_fetch: download the assets a candidate names into the asset bucket, as Asset objects."""
