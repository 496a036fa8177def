"""publish_data: a task running on an engine makes data available to its
client (AsyncResult.data), as IPython Parallel's datapub does; here the
data comes with the task's reply."""

__all__ = ["publish_data"]


def publish_data(data):
    """Merges a dict into what the running execute publishes."""
    import ztask_worker

    ztask_worker.current.setdefault("data", {}).update(data)
