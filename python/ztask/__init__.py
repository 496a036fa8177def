"""ztask for Python: submit Python functions, commands and engine functions
to a ztask cluster, and wait for them as concurrent.futures Futures.

    import ztask
    c = ztask.Client()
    f = c.submit(pow, 2, 10)
    print(f.result())                        # 1024
    fs = c.map(lambda x: x * x, range(100))
    print(sum(c.gather(fs)))

docs/python.md has the whole API; `ztask.compat` is IPython Parallel's.
"""

from concurrent.futures import ALL_COMPLETED, FIRST_COMPLETED, FIRST_EXCEPTION, as_completed, wait

from .client import Client
from .futures import CommandResult, Future
from .dependencies import Dependency, depend, require
from .errors import (
    BadTask,
    ClusterError,
    EngineError,
    ImpossibleDependency,
    InvalidDependency,
    RemoteError,
    TaskAborted,
    TaskError,
    TaskFailed,
    TaskRejected,
    TaskTimeout,
    TimeLimitExceeded,
    UnmetDependency,
    Unsatisfiable,
)

__version__ = "0.2.0"

__all__ = [
    "ALL_COMPLETED", "FIRST_COMPLETED", "FIRST_EXCEPTION", "as_completed", "wait",
    "Client", "CommandResult", "Future", "Dependency", "depend", "require",
    "BadTask", "ClusterError", "EngineError", "ImpossibleDependency", "InvalidDependency", "RemoteError",
    "TaskAborted", "TaskError", "TaskFailed", "TaskRejected", "TaskTimeout", "TimeLimitExceeded",
    "UnmetDependency", "Unsatisfiable",
]
