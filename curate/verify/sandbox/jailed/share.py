"""The test process's side of a folder shared with the program (`launch.new_share`): pytest's temporary
folders and `tempfile`'s files and folders are made inside it, open to the program's uid.

The program and the test process run as different uids (root hosts), and pytest (`tmp_path`: 0700) and
`tempfile` (`mkstemp`: 0600, `mkdtemp`: 0700) make what they create private to their own uid: each is opened
(files 0666, folders 0777) once made. The folder's name is random and its parent unlistable, so only this
run reaches it; the program cannot leave links or special files there (`jail.seccomp_filter(strict=True)`).
"""

from __future__ import annotations

import os


def use_shared_folder(folder: str) -> None:
    """Make `tempfile` create in `<folder>/tmp` (and subprocesses, through TMPDIR), with open modes."""
    import tempfile

    tmp = os.path.join(folder, "tmp")
    os.makedirs(tmp, exist_ok=True)
    os.chmod(tmp, 0o777)
    tempfile.tempdir = tmp
    os.environ["TMPDIR"] = tmp
    mkstemp, mkdtemp, named = tempfile.mkstemp, tempfile.mkdtemp, tempfile.NamedTemporaryFile

    def open_mkstemp(*args, **kwargs):
        fd, path = mkstemp(*args, **kwargs)
        os.fchmod(fd, 0o666)
        return fd, path

    def open_mkdtemp(*args, **kwargs):  # TemporaryDirectory calls it too
        path = mkdtemp(*args, **kwargs)
        os.chmod(path, 0o777)
        return path

    def open_named(*args, **kwargs):
        f = named(*args, **kwargs)
        os.fchmod(f.fileno(), 0o666)
        return f

    tempfile.mkstemp, tempfile.mkdtemp, tempfile.NamedTemporaryFile = open_mkstemp, open_mkdtemp, open_named


def open_pytest_folders() -> None:
    """pytest makes its temporary folders with mode 0700: they are opened to 0777 once made."""
    from _pytest.tmpdir import TempPathFactory

    make, base = TempPathFactory.mktemp, TempPathFactory.getbasetemp

    def mktemp(self, basename: str, numbered: bool = True):
        path = make(self, basename, numbered)
        os.chmod(path, 0o777)
        return path

    def getbasetemp(self):
        path = base(self)
        os.chmod(path, 0o777)
        return path

    TempPathFactory.mktemp, TempPathFactory.getbasetemp = mktemp, getbasetemp
