"""The Django admin's home page: figures read from the rollups, drawn as SVG
on the server (no script, nothing from a CDN)."""
