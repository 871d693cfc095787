class UnreadableDocument(Exception):
    """The document cannot be indexed.

    `str(exc)` is a sentence a person can act on, e.g. "The PDF is encrypted:
    upload it without a password." It never names a Python class or shows a
    trace: callers store it and show it to the uploader as is.
    """
