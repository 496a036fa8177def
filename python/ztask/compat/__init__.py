"""IPython Parallel's API over ztask (filled in below)."""
