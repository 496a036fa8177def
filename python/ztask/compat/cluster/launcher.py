"""The names of IPython Parallel's launchers, for programs that pick one:
each stands for one of taskcluster's (--launcher local, mpi, ssh, slurm).
ztask starts its processes itself; these classes only say which launcher."""

__all__ = ["find_launcher_class", "LocalProcessLauncher", "LocalControllerLauncher", "LocalEngineSetLauncher",
           "MPIEngineSetLauncher", "MPIControllerLauncher", "SlurmControllerLauncher", "SSHControllerLauncher", "SSHEngineSetLauncher", "SlurmEngineSetLauncher", "SGEEngineSetLauncher",
           "ProcessStateError"]


class ProcessStateError(Exception):
    pass


class BaseLauncher:
    """A launcher's name as taskcluster knows it (None: taskcluster has none
    of that kind)."""

    ztask_launcher = "local"
    controller_args = []
    engine_args = []


class LocalProcessLauncher(BaseLauncher):
    pass


class LocalControllerLauncher(LocalProcessLauncher):
    pass


class LocalEngineSetLauncher(LocalProcessLauncher):
    pass


class MPIEngineSetLauncher(BaseLauncher):
    ztask_launcher = "mpi"


class MPIControllerLauncher(LocalControllerLauncher):
    """The hub and the scheduler run here: taskcluster starts them itself."""


class SSHEngineSetLauncher(BaseLauncher):
    ztask_launcher = "ssh"


class SlurmEngineSetLauncher(BaseLauncher):
    ztask_launcher = "slurm"


class SlurmControllerLauncher(LocalControllerLauncher):
    pass


class SSHControllerLauncher(LocalControllerLauncher):
    pass


class SGEEngineSetLauncher(BaseLauncher):
    ztask_launcher = None


_ABBREVIATIONS = {"local": "Local", "mpi": "MPI", "mpiexec": "MPI", "ssh": "SSH", "slurm": "Slurm", "sge": "SGE"}


def find_launcher_class(name, kind):
    """The launcher class for a name ("MPI", "local", a full dotted name)
    and a kind ("engine" or "controller")."""
    if isinstance(name, type):
        return name
    short = name.rsplit(".", 1)[-1]
    prefix = _ABBREVIATIONS.get(short.lower(), short)
    suffix = "EngineSetLauncher" if kind == "engine" else "ControllerLauncher"
    for candidate in (short, prefix + suffix, prefix + "Launcher"):
        cls = globals().get(candidate)
        if isinstance(cls, type) and issubclass(cls, BaseLauncher):
            return cls
    raise ValueError("no %s launcher called %r" % (kind, name))
