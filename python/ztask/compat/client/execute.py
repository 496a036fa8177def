"""What view.execute returns: an ExecuteReply per engine, as IPython
Parallel's (execution_count, execute_result, stdout, rich reprs)."""


class ExecuteReply:
    """The reply to one execute on one engine."""

    def __init__(self, msg_id, content, metadata):
        self.msg_id = msg_id
        self._content = content or {}
        self.metadata = metadata

    @classmethod
    def of(cls, value, future):
        from .metadata import metadata_of

        return cls(future.id, value, metadata_of(future))

    @property
    def execution_count(self):
        return self._content.get("execution_count")

    @property
    def execute_result(self):
        return self._content.get("execute_result")

    @property
    def stdout(self):
        return self.metadata.get("stdout", "")

    @property
    def stderr(self):
        return self.metadata.get("stderr", "")

    @property
    def outputs(self):
        return self._content.get("outputs") or []

    def __getitem__(self, key):
        return self.metadata[key]

    def __getattr__(self, key):
        if key.startswith("_repr_") and key.endswith("_"):
            mime = {"_repr_html_": "text/html", "_repr_png_": "image/png", "_repr_jpeg_": "image/jpeg",
                    "_repr_svg_": "image/svg+xml", "_repr_latex_": "text/latex", "_repr_json_": "application/json",
                    "_repr_markdown_": "text/markdown", "_repr_javascript_": "application/javascript",
                    "_repr_pretty_": None}.get(key)
            result = self._content.get("execute_result") or {}
            if mime is None or mime not in result.get("data", {}):
                raise AttributeError(key)
            data, md = result["data"][mime], result.get("metadata", {}).get(mime)
            return (lambda: (data, md)) if md else (lambda: data)
        try:
            return self.metadata[key]
        except KeyError:
            raise AttributeError(key) from None

    def _plain(self):
        result = self._content.get("execute_result") or {}
        return result.get("data", {}).get("text/plain", "")

    def __repr__(self):
        return "<ExecuteReply[%s]: %s>" % (self.execution_count, self._plain())

    __str__ = __repr__

    def __eq__(self, other):
        return isinstance(other, ExecuteReply) and (self.msg_id, self._content) == (other.msg_id, other._content)

    def __hash__(self):
        return hash(self.msg_id)
